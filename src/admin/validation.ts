import { z } from 'zod';
import { scopes } from '../auth/keys';
import { idPattern } from '../lib/ids';

export const idSchema = z.string().regex(idPattern, 'must be a 24-character lowercase hex ID');

export const projectNameSchema = z
  .string()
  .trim()
  .min(1, 'must not be empty')
  .max(100, 'must be at most 100 characters');

/** An environment's alias; it can never look like an ID, so "ID or alias" is never ambiguous. */
export const environmentAliasSchema = z
  .string()
  .regex(
    /^[a-z][a-z0-9-]{0,31}$/,
    'must be 1 to 32 characters: lowercase letters, digits and dashes, starting with a letter',
  )
  .refine((v) => !idPattern.test(v), 'must not look like an ID');

export const scopeSchema = z.enum(scopes);
export const scopesSchema = z.array(scopeSchema).min(1, 'must name at least one scope').max(scopes.length);

/** Rotation grace period: up to 30 days, default one day. */
export const graceSecondsSchema = z
  .number()
  .int()
  .min(0)
  .max(30 * 24 * 3600);
