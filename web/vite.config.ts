import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/**
 * The console's build: one page, hashed assets under /assets/, no inline scripts (the CSP of
 * src/ops/console.ts allows 'self' only). Preact's JSX through Vite's own transform.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/',
  publicDir: 'public',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    reportCompressedSize: true,
    chunkSizeWarningLimit: 400,
  },
  logLevel: 'warn',
});
