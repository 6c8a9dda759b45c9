import { existsSync } from 'node:fs';
import { join } from 'node:path';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { projectRoot } from '../db/schema-source';

/** Where `npm run web:build` writes the console (web/vite.config.ts). */
export const consoleDistDir = join(projectRoot, 'web', 'dist');

/**
 * The console's policy: its own scripts and styles only (no inline code, no eval), images from the
 * build or drawn in the page, and requests to this origin only (GraphQL and its SSE streams).
 */
export const consoleCsp = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

const missingBuildPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Parley console not built</title></head>
<body><main><h1>The Parley console is not built</h1>
<p>This instance has no console build in <code>web/dist</code>. Build it from the repository with
<code>npm run web:build</code> (<code>npm ci</code> does it too), then reload this page.</p>
<p>The GraphQL API is at <a href="/graphql">/graphql</a>.</p></main></body></html>`;

/**
 * Serves the console's static build at `/` (index.html and the hashed files under /assets/), with
 * the console's CSP. Without a build, `/` answers 503 with a page saying how to make it.
 */
export function consoleRouter(distDir: string = consoleDistDir): Router {
  const router = express.Router();
  const withCsp = (_req: Request, res: Response, next: NextFunction) => {
    res.setHeader('Content-Security-Policy', consoleCsp);
    next();
  };
  router.use('/assets', withCsp, (req, res, next) => {
    if (!existsSync(join(distDir, 'index.html'))) {
      next();
      return;
    }
    // Hashed names: a file never changes under its name.
    express.static(join(distDir, 'assets'), { immutable: true, maxAge: '1y', index: false, fallthrough: true })(
      req,
      res,
      next,
    );
  });
  router.get(['/', '/index.html'], withCsp, (_req, res) => {
    const index = join(distDir, 'index.html');
    if (!existsSync(index)) {
      res.status(503).type('html').setHeader('Cache-Control', 'no-store').send(missingBuildPage);
      return;
    }
    res.setHeader('Cache-Control', 'no-cache');
    res.sendFile(index);
  });
  router.get('/favicon.svg', withCsp, (_req, res, next) => {
    const file = join(distDir, 'favicon.svg');
    if (!existsSync(file)) {
      next();
      return;
    }
    res.sendFile(file);
  });
  return router;
}
