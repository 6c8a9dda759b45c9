import { z } from 'zod';

/**
 * Request schemas of the runtime, shared by the GraphQL arguments and the REST routes: the
 * action of RUNTIME-NOTES.md, a request's `variables` and `config`, user IDs and the state shape.
 */

export const userIdSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(256, 'must be at most 256 characters')
  .describe('Any string that identifies the end user to you.');

export const sessionIdSchema = z.string().min(1).max(256);

/** An environment given by ID or alias. */
export const environmentRefSchema = z.string().min(1, 'must not be empty').max(64);

const actionTypeSchema = z
  .string()
  .regex(/^[A-Za-z0-9_:.-]{1,100}$/, 'must be an action type such as launch, text, intent or a button’s request type');

const entitySchema = z.looseObject({
  name: z.string().min(1).max(100),
  value: z.union([z.string().max(10_000), z.number()]),
});

/** `{type, payload}`: known types are checked strictly, others (button paths, custom action paths) loosely. */
export const actionSchema = z
  .strictObject({ type: actionTypeSchema, payload: z.unknown().optional() })
  .superRefine((action, ctx) => {
    const p = action.payload;
    const issue = (message: string, path: (string | number)[] = ['payload']) =>
      ctx.addIssue({ code: 'custom', message, path });
    switch (action.type) {
      case 'text':
        if (typeof p !== 'string') issue('must be the user’s words, a string');
        else if (p.length > 10_000) issue('must be at most 10000 characters');
        break;
      case 'intent': {
        const parsed = z
          .looseObject({
            intent: z.looseObject({ name: z.string().min(1).max(100) }),
            query: z.string().max(10_000).optional(),
            entities: z.array(entitySchema).max(50).optional(),
            confidence: z.number().min(0).max(1).optional(),
          })
          .safeParse(p);
        if (!parsed.success) {
          for (const i of parsed.error.issues)
            issue(i.message, ['payload', ...i.path.map((s) => s as string | number)]);
        }
        break;
      }
      case 'event': {
        const parsed = z.looseObject({ event: z.looseObject({ name: z.string().min(1).max(100) }) }).safeParse(p);
        if (!parsed.success) {
          for (const i of parsed.error.issues)
            issue(i.message, ['payload', ...i.path.map((s) => s as string | number)]);
        }
        break;
      }
      case 'launch':
      case 'no-reply':
        if (p !== undefined && p !== null && (typeof p !== 'object' || Array.isArray(p)))
          issue('must be an object if given');
        break;
    }
  });

export type ActionInput = z.infer<typeof actionSchema>;

/** Variables merged into the user's before the turn. */
export const requestVariablesSchema = z
  .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'must be a variable name'), z.json())
  .refine((v) => JSON.stringify(v).length <= 100_000, 'must be at most 100 KB of JSON');

/**
 * A request's `config`. Parley reads `excludeTypes`, `stopTypes` and `stopAll`; other members
 * that existing clients send (`tts`, `stripSSML`, …) are accepted and ignored.
 */
export const requestConfigSchema = z.looseObject({
  excludeTypes: z.array(z.string().min(1).max(100)).max(50).optional(),
  stopTypes: z.array(z.string().min(1).max(100)).max(50).optional(),
  stopAll: z.boolean().optional(),
});

export type RequestConfig = z.infer<typeof requestConfigSchema>;

/** The body of `PUT .../state`: a whole state. */
export const stateSchema = z.strictObject({
  stack: z
    .array(
      z
        .strictObject({
          /** The original's frames name the flow twice; Parley's states given out do too. */
          programID: z.string().min(1).max(64).optional(),
          diagramID: z.string().min(1).max(64),
          nodeID: z.string().min(1).max(64).nullable(),
          variables: z.record(z.string(), z.json()).optional(),
          storage: z.record(z.string(), z.json()).optional(),
        })
        .refine((f) => f.programID === undefined || f.programID === f.diagramID, {
          message: 'must equal diagramID (both name the flow)',
          path: ['programID'],
        }),
    )
    .max(64),
  storage: z.record(z.string(), z.json()).optional(),
  variables: z.record(z.string(), z.json()).optional(),
});
