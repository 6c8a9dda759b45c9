import { Ajv, type ValidateFunction } from 'ajv';

/**
 * Tool arguments are checked against the tool's JSON Schema before the tool runs: a model that
 * writes bad JSON, or JSON that does not fit, gets the reason back as the tool's result and can
 * try again. Validators are compiled once per schema text.
 */

const ajv = new Ajv({ allErrors: true, strict: false, validateSchema: true });
const cache = new Map<string, ValidateFunction>();
const cacheLimit = 500;

function validatorOf(schema: Record<string, unknown>): ValidateFunction {
  const key = JSON.stringify(schema);
  let validate = cache.get(key);
  if (!validate) {
    validate = ajv.compile(schema);
    if (cache.size >= cacheLimit) cache.delete(cache.keys().next().value as string);
    cache.set(key, validate);
  }
  return validate;
}

/** Why a tool's parameters are not a usable JSON Schema, or null (publish-time check). */
export function checkParameterSchema(schema: Record<string, unknown>): string | null {
  if (schema.type !== 'object') return 'must be a JSON Schema of type "object"';
  try {
    validatorOf(schema);
    return null;
  } catch (err) {
    return `is not a valid JSON Schema: ${(err as Error).message}`;
  }
}

export type ParsedArguments = { ok: true; value: Record<string, unknown> } | { ok: false; error: string };

/** Parses the model's argument text and checks it against the schema. */
export function parseArguments(text: string, schema: Record<string, unknown>): ParsedArguments {
  let value: unknown;
  try {
    value = text.trim() === '' ? {} : JSON.parse(text);
  } catch (err) {
    return { ok: false, error: `the arguments are not valid JSON (${(err as Error).message})` };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, error: 'the arguments must be a JSON object' };
  }
  const validate = validatorOf(schema);
  if (!validate(value)) {
    const reasons = (validate.errors ?? []).map(
      (e) => `${e.instancePath || '(arguments)'} ${e.message ?? 'is invalid'}`,
    );
    return { ok: false, error: `the arguments do not fit the tool's parameters: ${reasons.join('; ')}` };
  }
  return { ok: true, value: value as Record<string, unknown> };
}
