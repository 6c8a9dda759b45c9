import type { NextFunction, Request, Response } from 'express';
import { graphiqlAssets, graphiqlAssetsPath } from '../ops/graphiql';

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
