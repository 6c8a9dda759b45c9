import { lexicographicSortSchema } from 'graphql';
import { builder, resolveSubscriptionEventsDirectly } from '../builder';
import './scalars';
import './admin';
import './runtime';
import './usage';
import { answerSearchPageRelationsDirectly } from './transcripts';
import './evaluations';
import './knowledge-base';
import './knowledge-base-tags';
import './integrations';
import './webchat';

/** The whole schema: one file per area registers its types and root fields on the builder. */
export const schema = answerSearchPageRelationsDirectly(
  resolveSubscriptionEventsDirectly(lexicographicSortSchema(builder.toSchema())),
);
