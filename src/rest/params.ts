import { z } from 'zod';
import { idPattern } from '../lib/ids';

/**
 * Schemas for what arrives as text in paths and query strings. They are strict: "10abc" is not a
 * number and "yes" is not a boolean, so a typo is a 400, never a silently different request.
 */

export const pathId = (what: string) => z.string().regex(idPattern, `must be a 24-character lowercase hex ${what} ID`);

/** A path segment any non-empty string may fill (IDs are checked by the GraphQL layer). */
export const pathString = z.string().min(1);

function single(value: unknown): unknown {
  return Array.isArray(value) ? value[value.length - 1] : value;
}

export const queryInt = (opts: { min?: number; max?: number; default?: number } = {}) => {
  let schema = z.number().int('must be an integer');
  if (opts.min !== undefined) schema = schema.min(opts.min, `must be at least ${opts.min}`);
  if (opts.max !== undefined) schema = schema.max(opts.max, `must be at most ${opts.max}`);
  return z.preprocess(
    (raw) => {
      const v = single(raw);
      if (v === undefined || v === '') return opts.default;
      return typeof v === 'string' && /^-?\d+$/.test(v.trim()) ? Number(v) : v;
    },
    opts.default === undefined ? schema.optional() : schema,
  );
};

export const queryBool = (defaultValue = false) =>
  z.preprocess(
    (raw) => {
      const v = single(raw);
      if (v === undefined || v === '') return defaultValue;
      if (v === 'true' || v === '1') return true;
      if (v === 'false' || v === '0') return false;
      return v;
    },
    z.boolean({ error: 'must be true or false' }),
  );

export const queryEnum = <T extends readonly [string, ...string[]]>(values: T, defaultValue: T[number]) =>
  z.preprocess((raw) => {
    const v = single(raw);
    return v === undefined || v === '' ? defaultValue : v;
  }, z.enum(values));

/**
 * A repeated query parameter (`?a=x&a=y`), a comma-separated one (`?a=x,y`), or the bracket forms
 * that qs and axios send (`?a[]=x`, `?a[0]=x`; the router folds those into `a`), checked by `schema`.
 */
export const queryStringList = (schema: z.ZodType<string[]>) =>
  z.preprocess((raw) => {
    if (raw === undefined || raw === '') return [];
    const list = Array.isArray(raw) ? raw : [raw];
    return list.flatMap((v) => (typeof v === 'string' ? v.split(',') : [v])).filter((v) => v !== '');
  }, schema);

/**
 * Folds the bracket forms of a list in a query string into the plain name: `a[]=x&a[1]=y&a=z`
 * becomes `a: [x, y, z]` (qs writes indices, axios empty brackets). Other names are kept as sent.
 */
export function foldBracketLists(query: Record<string, unknown>): Record<string, unknown> {
  const folded: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(query)) {
    const match = /^(.+)\[\d*\]$/.exec(name);
    const key = match ? match[1]! : name;
    const values = Array.isArray(value) ? value : [value];
    if (!(key in folded)) folded[key] = match ? values : value;
    else folded[key] = [...(Array.isArray(folded[key]) ? (folded[key] as unknown[]) : [folded[key]]), ...values];
  }
  return folded;
}

/** An optional one-of-these query parameter: absent or empty means "not given". */
export const queryOptionalEnum = <T extends readonly [string, ...string[]]>(values: T) =>
  z.preprocess((raw) => {
    const v = single(raw);
    return v === undefined || v === '' ? undefined : v;
  }, z.enum(values).optional());
