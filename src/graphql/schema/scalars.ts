import { GraphQLError } from 'graphql';
import { JSONObjectResolver, JSONResolver, SafeIntResolver } from 'graphql-scalars';
import { parseTimestamp, timestampProblemMessage } from '../../lib/time';
import { builder } from '../builder';

builder.scalarType('DateTime', {
  description:
    'An ISO 8601 date-time. Inputs must carry a zone designator (Z or ±hh:mm) and name a real date; outputs are UTC with milliseconds, e.g. 2026-01-02T03:04:05.678Z.',
  serialize: (value) => (value instanceof Date ? value : new Date(value)).toISOString(),
  parseValue: (value) => {
    if (typeof value !== 'string') throw new GraphQLError('DateTime must be a string');
    const parsed = parseTimestamp(value);
    if (!parsed.ok) throw new GraphQLError(`DateTime ${timestampProblemMessage[parsed.problem]}`);
    return parsed.date;
  },
});

builder.addScalarType('JSON', JSONResolver);
builder.addScalarType('JSONObject', JSONObjectResolver);
builder.addScalarType('SafeInt', SafeIntResolver);
