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

builder.scalarType('File', {
  description:
    'An uploaded file: a part of a GraphQL multipart request (github.com/jaydenseric/graphql-multipart-request-spec). Input only.',
  serialize: () => {
    throw new GraphQLError('File is an input type');
  },
  // Yoga's multipart parser yields its fetch implementation's File, not always Node's own class:
  // accept anything shaped like one.
  parseValue: (value) => {
    const file = value as Partial<File> | null;
    if (
      file &&
      typeof file.arrayBuffer === 'function' &&
      typeof file.name === 'string' &&
      typeof file.size === 'number'
    )
      return file as File;
    throw new GraphQLError('File must be an uploaded file (send the request as multipart/form-data)');
  },
});
