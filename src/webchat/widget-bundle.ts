import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/**
 * The official web chat widget's embeddable build, from Parley's own installed dependency
 * `@voiceflow/react-chat` (MIT), so a page embeds the chat with one `<script>` pointing at Parley
 * and nothing from a third-party CDN (docs/web-chat.md "Embedding").
 */

const packageName = '@voiceflow/react-chat';

export interface WidgetBundle {
  version: string;
  /** dist/bundle.mjs: a classic script (an IIFE) that defines `window.voiceflow.chat`. */
  script: Buffer;
  /** The licence the package declares, with its copyright line, served beside the bundle. */
  license: string;
}

/**
 * The package ships no LICENSE file of its own; its package.json declares MIT. This is the MIT
 * License text with the package's authors as its copyright holders.
 */
function mitLicense(pkg: { name: string; version: string; author?: unknown; homepage?: string }): string {
  const author = typeof pkg.author === 'string' ? pkg.author : 'Voiceflow';
  return `${pkg.name} ${pkg.version} — ${pkg.homepage ?? ''}
Served unmodified by Parley from its installed npm package (dist/bundle.mjs).

MIT License

Copyright (c) Voiceflow, Inc. and ${author}

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
`;
}

/** Reads the installed widget once (the caller keeps it); throws when the package is missing or not MIT. */
export function loadWidgetBundle(): WidgetBundle {
  const require = createRequire(import.meta.url);
  const manifestPath = require.resolve(`${packageName}/package.json`);
  const pkg = JSON.parse(readFileSync(manifestPath, 'utf8')) as {
    name: string;
    version: string;
    license?: string;
    author?: unknown;
    homepage?: string;
  };
  if (pkg.license !== 'MIT') throw new Error(`${packageName} declares licence ${pkg.license}, not MIT`);
  return {
    version: pkg.version,
    script: readFileSync(join(dirname(manifestPath), 'dist', 'bundle.mjs')),
    license: mitLicense(pkg),
  };
}
