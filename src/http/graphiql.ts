import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import type { NextFunction, Request, Response } from 'express';

/**
 * GraphiQL served from the installed package, so it works without a network (docs/operations.md
 * "GraphiQL"). Yoga's own page loads its bundle, styles and editor workers from unpkg.com;
 * `@graphql-yoga/render-graphiql` carries the same build (GraphiQL with the Monaco editor) as
 * strings, which we serve as separate files under `/graphiql/<version>/`. The page itself has no
 * inline script — a JSON data block holds its options and `boot.js` reads it — so its
 * Content-Security-Policy allows scripts from this origin only, workers from this origin only
 * (the editor's workers are real files here, not blob: URLs), styles from here plus inline ones
 * (Monaco and GraphiQL set element styles), fonts and images from the stylesheet's data: URLs,
 * and requests to this origin only.
 */

const require = createRequire(import.meta.url);
const version: string = require('@graphql-yoga/render-graphiql/package.json').version;

export const graphiqlAssetsPrefix = '/graphiql';
/** Where the files live; the package version in the path lets browsers keep them for a year. */
export const graphiqlAssetsPath = `${graphiqlAssetsPrefix}/${version}`;

/** The editor's workers, by the label Monaco asks for. */
const workerFiles = { editorWorkerService: 'editor.worker.js', json: 'json.worker.js', graphql: 'graphql.worker.js' };

export const graphiqlCsp = [
  "default-src 'none'",
  "script-src 'self'",
  "worker-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  'font-src data:',
  "img-src 'self' data:",
  "connect-src 'self'",
  "manifest-src 'none'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

/** The script that sets up the workers and renders GraphiQL with the page's options. */
const bootJs = `(function () {
  var base = ${JSON.stringify(`${graphiqlAssetsPath}/`)};
  var files = ${JSON.stringify(workerFiles)};
  self.MonacoEnvironment = {
    globalAPI: false,
    getWorkerUrl: function (_moduleId, label) { return base + (files[label] || files.editorWorkerService); },
  };
  var options = JSON.parse(document.getElementById('graphiql-options').textContent || '{}');
  YogaGraphiQL.renderYogaGraphiQL(document.getElementById('root'), options);
})();
`;

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

type Assets = Map<string, Asset>;

function asset(body: string | Buffer, type: string): Asset {
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  return { body: bytes, type, etag: `"${createHash('sha256').update(bytes).digest('base64url').slice(0, 27)}"` };
}

let loading: Promise<Assets> | null = null;

/** The files, built on first use: the package is about 9 MB of strings, not worth holding unused. */
export function graphiqlAssets(): Promise<Assets> {
  loading ??= import('@graphql-yoga/render-graphiql/graphiql').then((m) => {
    const js = 'text/javascript; charset=utf-8';
    const favicon = /^data:([^;,]+);base64,(.*)$/s.exec(m.favicon);
    const files: Assets = new Map([
      ['graphiql.js', asset(m.js, js)],
      ['graphiql.css', asset(m.css, 'text/css; charset=utf-8')],
      ['boot.js', asset(bootJs, js)],
      [workerFiles.editorWorkerService, asset(m.editorWorkerService, js)],
      [workerFiles.json, asset(m.jsonWorker, js)],
      [workerFiles.graphql, asset(m.graphqlWorker, js)],
    ]);
    if (favicon?.[1] && favicon[2]) files.set('favicon.ico', asset(Buffer.from(favicon[2], 'base64'), favicon[1]));
    return files;
  });
  return loading;
}

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);

/** Yoga's `renderGraphiQL`: the page, with every URL on this origin. */
export function renderLocalGraphiQL(options: { title?: string } & Record<string, unknown>): string {
  // In a JSON data block "</" could end the element early; \u003c keeps the JSON the same.
  const json = JSON.stringify(options).replace(/</g, '\\u003c');
  const title = escapeHtml(options.title ?? 'GraphiQL');
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <title>${title}</title>
    <link rel="icon" href="${graphiqlAssetsPath}/favicon.ico" />
    <link rel="stylesheet" href="${graphiqlAssetsPath}/graphiql.css" />
  </head>
  <body id="body" class="no-focus-outline">
    <noscript>GraphiQL needs JavaScript.</noscript>
    <div id="root"></div>
    <script type="application/json" id="graphiql-options">${json}</script>
    <script src="${graphiqlAssetsPath}/graphiql.js"></script>
    <script src="${graphiqlAssetsPath}/boot.js"></script>
  </body>
</html>
`;
}

/** GET/HEAD `/graphiql/<version>/<file>`: the files above, cached for a year (the path changes with the version). */
export function graphiqlAssetsHandler() {
  return async (req: Request, res: Response, next: NextFunction) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return next();
    if (!req.path.startsWith(`${graphiqlAssetsPath}/`)) return next();
    try {
      const file = (await graphiqlAssets()).get(req.path.slice(graphiqlAssetsPath.length + 1));
      if (!file) return next();
      res.setHeader('Content-Type', file.type);
      res.setHeader('Cache-Control', 'public, max-age=31536000, immutable');
      res.setHeader('ETag', file.etag);
      if (req.headers['if-none-match'] === file.etag) {
        res.status(304).end();
        return;
      }
      res.setHeader('Content-Length', String(file.body.length));
      if (req.method === 'HEAD') res.end();
      else res.end(file.body);
    } catch (err) {
      next(err);
    }
  };
}
