import { z } from 'zod';

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  switch (typeof value) {
    case 'object':
      return 'an object';
    case 'string':
      return 'a string';
    case 'number':
      return Number.isInteger(value) ? 'an integer' : 'a number';
    case 'boolean':
      return 'a boolean';
    default:
      return typeof value;
  }
}

const article: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  boolean: 'a boolean',
  object: 'an object',
  array: 'an array',
  null: 'null',
};

/**
 * zod's default messages speak about zod ("Invalid input: expected string, received undefined").
 * API errors should say what to send: "is required", "must be a string (got a number)". Schemas
 * that give their own message keep it.
 */
z.config({
  customError: (issue) => {
    if (issue.code === 'invalid_type') {
      if (issue.input === undefined) return 'is required';
      const expected = article[issue.expected] ?? issue.expected;
      return `must be ${expected} (got ${typeName(issue.input)})`;
    }
    if (issue.code === 'too_small' && issue.origin === 'string') {
      return issue.minimum === 1 ? 'must not be empty' : `must be at least ${issue.minimum} characters`;
    }
    if (issue.code === 'too_big' && issue.origin === 'string') return `must be at most ${issue.maximum} characters`;
    if (issue.code === 'too_small' && issue.origin === 'array') return `must have at least ${issue.minimum} item(s)`;
    if (issue.code === 'too_big' && issue.origin === 'array') return `must have at most ${issue.maximum} items`;
    if (issue.code === 'too_small' && issue.origin === 'number') return `must be at least ${issue.minimum}`;
    if (issue.code === 'too_big' && issue.origin === 'number') return `must be at most ${issue.maximum}`;
    if (issue.code === 'invalid_value')
      return `must be one of: ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    return undefined;
  },
});
