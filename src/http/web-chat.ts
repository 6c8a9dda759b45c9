import express, { type NextFunction, type Request, type Response, Router } from 'express';
import { z } from 'zod';
import type { PrismaDb } from '../db/client';
import { AppError, issuesToDetails, statusOf } from '../lib/errors';
import { isId } from '../lib/ids';
import type { Logger } from '../lib/logger';
import type { RateLimiter } from '../ops/rate-limit';
import { rateLimitHeaders, rateLimitMessage } from '../ops/rate-limit';
import { groupOfPath } from '../ops/route-groups';
import { sendError } from '../rest/errors';
import type { Runtime } from '../runtime/service';
import type { OutputTrace } from '../runtime/trace-format';
import type { RuntimeAction } from '../runtime/types';
import { actionSchema, type RequestConfig, requestConfigSchema, userIdSchema } from '../runtime/validation';
import { clientInfoSchema, feedbackSchema, recordClientInfo, recordFeedback } from '../webchat/conversation';
import {
  getWebChatSettings,
  listEnabledWebChatSettings,
  originAllowed,
  publishingOf,
  type WebChatSettings,
} from '../webchat/settings';
import { loadWidgetBundle, type WidgetBundle } from '../webchat/widget-bundle';

/**
 * The official web chat widget's public routes (docs/web-chat.md). They carry no API key, so they
 * are not in the REST table (which runs GraphQL operations as the key's principal): each request
 * is let in here by the project's web chat settings of the environment its `versionID` header names
 * (default `development`) — refused unless that environment has web chat on and the request's
 * Origin is one it allows — and then does exactly one narrow thing for the user ID in its path (or,
 * for the transcripts POST, in its body). Preflights and a transcripts POST without `versionID` are
 * let in by any environment of the project that has web chat on for the Origin. The widget's own
 * build and Parley's images are served here too, to anyone.
 */

/** Paths this router owns: the global CORS middleware leaves them alone (their CORS is per project). */
export function isWebChatPath(path: string): boolean {
  return /^\/public\/[^/]+\//.test(path) || /^\/feedback\/[^/]+\/user\//.test(path);
}

export interface WebChatServices {
  db: { prisma: PrismaDb };
  runtime: Pick<Runtime, 'startTurn'>;
  rateLimiter: RateLimiter;
  logger: Logger;
}

export interface WebChatOptions {
  /** Largest JSON body the public routes accept. */
  bodyLimitBytes: number;
}

const allowedMethods = 'GET, POST';
const allowedHeaders = ['content-type', 'versionid'];

const interactBody = z.strictObject({
  action: actionSchema,
  config: requestConfigSchema.optional(),
});

/** The answer to a request web chat does not serve: the same for a missing project, an environment that is off, or an unknown one. */
function refuseOff(res: Response, projectId: string): void {
  sendError(res, 404, 'NOT_FOUND', `Web chat is not enabled for project "${projectId}".`);
}

function versionHeaderOf(req: Request): string | null {
  const header = req.get('versionid');
  return header?.trim() ? header.trim() : null;
}

function environmentOf(req: Request): string {
  return versionHeaderOf(req) ?? 'development';
}

function refuseOrigin(res: Response, origin: string | undefined): void {
  sendError(res, 403, 'FORBIDDEN', `Origin ${origin ? `"${origin}"` : '(none)'} may not use this web chat.`);
}

function allowOrigin(res: Response, origin: string): void {
  res.setHeader('Access-Control-Allow-Origin', origin);
  res.setHeader(
    'Access-Control-Expose-Headers',
    'X-Request-Id, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset',
  );
  res.setHeader('Vary', 'Origin');
}

/**
 * For requests that name no environment — a CORS preflight (browsers never send a custom header's
 * value in one) and the widget's transcripts POST: the settings of every environment of the
 * project with web chat on that allow the request's origin. Refused as `admit` refuses.
 */
async function admitAnyEnvironment(
  services: WebChatServices,
  req: Request,
  res: Response,
): Promise<WebChatSettings[] | null> {
  const projectId = String(req.params.projectID);
  const enabled = isId(projectId) ? await listEnabledWebChatSettings(services.db.prisma, projectId) : [];
  if (!enabled.length) {
    refuseOff(res, projectId);
    return null;
  }
  const origin = req.get('origin');
  const allowed = enabled.filter((settings) => originAllowed(settings, origin));
  if (!allowed.length) {
    refuseOrigin(res, origin);
    return null;
  }
  allowOrigin(res, origin as string);
  return allowed;
}

/** The settings when the request may use web chat; otherwise the refusal has been sent and null returned. */
async function admit(services: WebChatServices, req: Request, res: Response): Promise<WebChatSettings | null> {
  const projectId = String(req.params.projectID);
  if (!isId(projectId)) {
    refuseOff(res, projectId);
    return null;
  }
  let settings: WebChatSettings;
  try {
    settings = await getWebChatSettings(services.db.prisma, projectId, environmentOf(req));
  } catch (err) {
    if (err instanceof AppError && err.code === 'NOT_FOUND') {
      refuseOff(res, projectId);
      return null;
    }
    throw err;
  }
  if (!settings.enabled) {
    refuseOff(res, projectId);
    return null;
  }
  const origin = req.get('origin');
  if (!originAllowed(settings, origin)) {
    refuseOrigin(res, origin);
    return null;
  }
  allowOrigin(res, origin as string);
  return settings;
}

/** Spends one request of the user ID's own budget (beside the client address's, spent at the edge). */
async function limitUser(
  services: WebChatServices,
  req: Request,
  res: Response,
  settings: WebChatSettings,
  userId: string,
) {
  const decision = await services.rateLimiter.consume(
    groupOfPath(req.path),
    `webchat:${settings.environmentId}:${userId}`,
  );
  if (!decision) return true;
  for (const [name, value] of Object.entries(rateLimitHeaders(decision))) res.setHeader(name, value);
  if (decision.allowed) return true;
  sendError(res, 429, 'RATE_LIMITED', rateLimitMessage(decision));
  return false;
}

function sendValidation(res: Response, error: z.ZodError, prefix?: string): void {
  const details = issuesToDetails(error.issues, prefix);
  sendError(res, 400, 'VALIDATION_FAILED', details.map((d) => `${d.path}: ${d.message}`).join('; '), { details });
}

function sendAppError(res: Response, err: unknown): boolean {
  if (!(err instanceof AppError)) return false;
  sendError(res, statusOf[err.code], err.code, err.message, { details: err.details });
  return true;
}

export function createWebChatRouter(services: WebChatServices, opts: WebChatOptions): Router {
  const router = Router({ caseSensitive: true });
  const json = express.json({ limit: opts.bodyLimitBytes, type: () => true });
  const wrap =
    (handler: (req: Request, res: Response) => Promise<void>) => (req: Request, res: Response, next: NextFunction) => {
      handler(req, res).catch((err: unknown) => {
        if (!sendAppError(res, err)) next(err);
      });
    };

  // Preflight: answered only when an environment of the project has web chat on for the origin.
  const preflight = wrap(async (req, res) => {
    const settings = await admitAnyEnvironment(services, req, res);
    if (!settings) return;
    const requested = (req.get('access-control-request-headers') ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase())
      .filter(Boolean);
    const unknown = requested.filter((h) => !allowedHeaders.includes(h));
    if (unknown.length) {
      res.removeHeader('Access-Control-Allow-Origin');
      sendError(res, 403, 'FORBIDDEN', `Headers not allowed: ${unknown.join(', ')}.`);
      return;
    }
    res.setHeader('Access-Control-Allow-Methods', allowedMethods);
    res.setHeader('Access-Control-Allow-Headers', allowedHeaders.join(', '));
    res.setHeader('Access-Control-Max-Age', '600');
    res.status(204).end();
  });
  router.options('/public/:projectID/publishing', preflight);
  router.options('/public/:projectID/state/user/:userID/interact', preflight);
  router.options('/public/:projectID/transcripts', preflight);
  router.options('/feedback/:projectID/user/:userID', preflight);

  router.get(
    '/public/:projectID/publishing',
    wrap(async (req, res) => {
      const settings = await admit(services, req, res);
      if (!settings) return;
      res.setHeader('Cache-Control', 'no-store');
      res.json(publishingOf(settings, `${req.protocol}://${req.get('host')}/webchat/assets`));
    }),
  );

  router.post(
    '/public/:projectID/state/user/:userID/interact',
    json,
    wrap(async (req, res) => {
      const settings = await admit(services, req, res);
      if (!settings) return;
      const userId = userIdSchema.safeParse(req.params.userID);
      if (!userId.success) {
        sendValidation(res, userId.error, 'userID');
        return;
      }
      const body = interactBody.safeParse(req.body);
      if (!body.success) {
        sendValidation(res, body.error);
        return;
      }
      if (!(await limitUser(services, req, res, settings, userId.data))) return;
      const handle = await services.runtime.startTurn({
        projectId: settings.projectId,
        environment: settings.environmentId,
        userId: userId.data,
        action: body.data.action as unknown as RuntimeAction,
        variables: null,
        sessionId: null,
        config: (body.data.config as RequestConfig | undefined) ?? null,
        profile: 'non-stream',
        includeState: false,
      });
      const trace: OutputTrace[] = [];
      for await (const event of handle.events) if (event.event === 'trace') trace.push(event.trace);
      const record = await handle.done;
      // The widget closes the session on an `end` trace, as the original sends when a conversation runs out of steps.
      if (record.conversationEnded && !trace.some((t) => t.type === 'end')) trace.push({ type: 'end', payload: null });
      res.json({ trace });
    }),
  );

  // The widget's client description, sent on the conversation's second turn with its user ID as
  // `sessionID` and no versionID header: it lands on the transcript that user's state names.
  router.post(
    '/public/:projectID/transcripts',
    json,
    wrap(async (req, res) => {
      const header = versionHeaderOf(req);
      const admitted = header ? await admit(services, req, res) : await admitAnyEnvironment(services, req, res);
      if (!admitted) return;
      const allowed = Array.isArray(admitted) ? admitted : [admitted];
      const body = clientInfoSchema.safeParse(req.body);
      if (!body.success) {
        sendValidation(res, body.error);
        return;
      }
      // The user's budget of each environment it may be in (one request spends from all, like the address's).
      for (const settings of allowed) if (!(await limitUser(services, req, res, settings, body.data.sessionID))) return;
      const recorded = await recordClientInfo(
        services.db.prisma,
        { projectId: allowed[0]!.projectId, environmentIds: allowed.map((s) => s.environmentId) },
        body.data,
      );
      res.json(recorded);
    }),
  );

  // Thumbs up/down on one of the agent's answers, when the environment has feedback on.
  router.post(
    '/feedback/:projectID/user/:userID',
    json,
    wrap(async (req, res) => {
      const settings = await admit(services, req, res);
      if (!settings) return;
      if (!settings.feedback) {
        sendError(res, 404, 'NOT_FOUND', 'Feedback is not enabled for this web chat.');
        return;
      }
      const userId = userIdSchema.safeParse(req.params.userID);
      if (!userId.success) {
        sendValidation(res, userId.error, 'userID');
        return;
      }
      const body = feedbackSchema.safeParse(req.body);
      if (!body.success) {
        sendValidation(res, body.error);
        return;
      }
      if (!(await limitUser(services, req, res, settings, userId.data))) return;
      const recorded = await recordFeedback(
        services.db.prisma,
        { projectId: settings.projectId, environmentId: settings.environmentId, userId: userId.data },
        body.data,
      );
      res.json(recorded);
    }),
  );

  // The widget itself, from Parley's installed dependency, and its licence beside it. Read on the
  // first request, so an instance that never serves it never holds it.
  let bundle: WidgetBundle | null = null;
  const widget = () => {
    bundle ??= loadWidgetBundle();
    return bundle;
  };
  router.get('/web-chat/bundle.mjs', (_req, res) => {
    const { script, version } = widget();
    res.setHeader('Content-Type', 'text/javascript; charset=utf-8');
    res.setHeader('Cache-Control', 'public, max-age=3600');
    res.setHeader('Cross-Origin-Resource-Policy', 'cross-origin');
    res.setHeader('X-Widget-Version', version);
    res.send(script);
  });
  router.get('/web-chat/LICENSE', (_req, res) => {
    res.setHeader('Content-Type', 'text/plain; charset=utf-8');
    res.setHeader('Cross-Origin-Resource-Policy', 'cross-origin');
    res.send(widget().license);
  });

  // Parley's own images for the widget (publishing names them when the project set none).
  for (const [name, svg] of Object.entries(assets)) {
    router.get(`/webchat/assets/${name}`, (_req, res) => {
      res.setHeader('Content-Type', 'image/svg+xml');
      res.setHeader('Cache-Control', 'public, max-age=86400');
      res.setHeader('Cross-Origin-Resource-Policy', 'cross-origin');
      res.send(svg);
    });
  }

  return router;
}

const assets: Record<string, string> = {
  'avatar.svg':
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><circle cx="32" cy="32" r="32" fill="#2e7ff1"/><path d="M18 22h28a4 4 0 0 1 4 4v14a4 4 0 0 1-4 4H30l-8 7v-7h-4a4 4 0 0 1-4-4V26a4 4 0 0 1 4-4z" fill="#fff"/></svg>',
  'launcher.svg':
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><path d="M4 5h16a1 1 0 0 1 1 1v10a1 1 0 0 1-1 1H10l-5 4v-4H4a1 1 0 0 1-1-1V6a1 1 0 0 1 1-1z" fill="#fff"/></svg>',
};
