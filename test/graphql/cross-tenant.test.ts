import {
  type FieldNode,
  type GraphQLInputType,
  getNamedType,
  isInputObjectType,
  type OperationDefinitionNode,
  parse,
} from 'graphql';
import { beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/admin/service';
import { scopes as allScopes } from '../../src/auth/keys';
import { schema } from '../../src/graphql/schema';
import { newId } from '../../src/lib/ids';
import { routes } from '../../src/rest/routes';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { publish } from '../helpers/runtime';

/**
 * DECISIONS.md §2: another tenant's resource answers exactly as a missing one. For every GraphQL
 * field and every REST route that takes an ID, a key of project A (a project key with every scope,
 * and a workspace key with every scope, admin included) names project B's resource, then a made-up
 * ID of the same shape: status and body must be byte-identical once the ID itself is replaced by a
 * placeholder. The tables below are checked against the schema and the route table, so a new
 * ID-taking field or route fails here until it has its row.
 */

type Kind =
  | 'project'
  | 'workspace'
  | 'environment'
  | 'transcript'
  | 'property'
  | 'evaluation'
  | 'document'
  | 'chunk'
  | 'tag'
  | 'version'
  | 'apiKey'
  | 'integration';

/** A value per position: the ID under test at one position, the caller's own resources elsewhere. */
type Values = Record<string, string>;

interface GqlCase {
  /** The operation; variables come from `vars`. */
  op: string;
  /** Argument paths (as the schema walk names them) that reference a stored resource, and its kind. */
  ids: Record<string, Kind>;
  /** Argument paths that look like IDs but are free labels chosen by the client, not references. */
  labels?: string[];
  /** Positions that narrow a search: an ID the project lacks matches nothing (an empty page, 200). */
  filters?: string[];
  vars: (v: Values) => Record<string, unknown>;
  /** Sent as a GraphQL multipart request with this file at variables.file. */
  file?: boolean;
}

interface RestCase {
  ids: Record<string, Kind>;
  filters?: string[];
  req: (v: Values) => {
    path: string;
    body?: unknown;
    query?: Record<string, string | undefined>;
    headers?: Record<string, string | undefined>;
  };
}

const program = {
  name: 'Cross',
  startFlow: 'main',
  flows: [{ id: 'main', start: 'hi', steps: [{ id: 'hi', type: 'message', message: 'hello' }] }],
};

const gqlCases: Record<string, GqlCase> = {
  // ── Queries ──
  'Query.integrations': {
    op: `query($p: ID!) { integrations(projectID: $p) { id } }`,
    ids: { projectID: 'project' },
    vars: (v) => ({ p: v.projectID }),
  },
  'Query.agentDeployments': {
    op: `query($p: ID!) { agentDeployments(projectID: $p) { updatedAt } }`,
    ids: { projectID: 'project' },
    vars: (v) => ({ p: v.projectID }),
  },
  'Query.agentVersion': {
    op: `query($id: ID!) { agentVersion(id: $id) { id } }`,
    ids: { id: 'version' },
    vars: (v) => ({ id: v.id }),
  },
  'Query.agents': {
    op: `query($p: ID!) { agents(projectID: $p) { id } }`,
    ids: { projectID: 'project' },
    vars: (v) => ({ p: v.projectID }),
  },
  'Query.apiKeys': {
    op: `query($p: ID, $w: ID) { apiKeys(projectID: $p, workspaceID: $w) { id } }`,
    ids: { projectID: 'project', workspaceID: 'workspace' },
    // One of the two at a time: the position under test alone.
    vars: (v) => (v.$at === 'projectID' ? { p: v.projectID } : { w: v.workspaceID }),
  },
  'Query.auditEvents': {
    op: `query($w: ID) { auditEvents(workspaceID: $w) { edges { node { id } } } }`,
    ids: { workspaceID: 'workspace' },
    vars: (v) => ({ w: v.workspaceID }),
  },
  'Query.environments': {
    op: `query($p: ID!) { environments(projectID: $p) { id } }`,
    ids: { projectID: 'project' },
    vars: (v) => ({ p: v.projectID }),
  },
  'Query.knowledgeBaseDocument': {
    op: `query($d: ID!) { knowledgeBaseDocument(documentID: $d) { documentID } }`,
    ids: { documentID: 'document' },
    vars: (v) => ({ d: v.documentID }),
  },
  'Query.knowledgeBaseDocuments': {
    op: `query($p: ID) { knowledgeBaseDocuments(projectID: $p) { total } }`,
    ids: { projectID: 'project' },
    vars: (v) => ({ p: v.projectID }),
  },
  'Query.knowledgeBaseQuery': {
    op: `query($i: KnowledgeBaseQueryInput!) { knowledgeBaseQuery(input: $i) { output } }`,
    ids: { 'input.projectID': 'project', 'input.environment': 'environment' },
    vars: (v) => ({
      i: { question: 'q', synthesis: false, projectID: v['input.projectID'], environment: v['input.environment'] },
    }),
  },
  'Query.project': {
    op: `query($id: ID!) { project(id: $id) { id } }`,
    ids: { id: 'project' },
    vars: (v) => ({ id: v.id }),
  },
  'Query.projects': {
    op: `query($w: ID) { projects(workspaceID: $w) { id } }`,
    ids: { workspaceID: 'workspace' },
    vars: (v) => ({ w: v.workspaceID }),
  },
  'Query.runtimeState': {
    op: `query($p: ID!, $e: String) { runtimeState(projectID: $p, userID: "u", environment: $e) }`,
    ids: { projectID: 'project', environment: 'environment' },
    labels: ['userID'],
    vars: (v) => ({ p: v.projectID, e: v.environment }),
  },
  'Query.userState': {
    op: `query($p: ID, $e: String) { userState(projectID: $p, userID: "u", environment: $e) }`,
    ids: { projectID: 'project', environment: 'environment' },
    labels: ['userID'],
    vars: (v) => ({ p: v.projectID, e: v.environment }),
  },
  'Query.transcript': {
    op: `query($id: ID!) { transcript(id: $id) { id } }`,
    ids: { id: 'transcript' },
    vars: (v) => ({ id: v.id }),
  },
  'Query.transcriptEvaluation': {
    op: `query($id: ID!) { transcriptEvaluation(id: $id) { id } }`,
    ids: { id: 'evaluation' },
    vars: (v) => ({ id: v.id }),
  },
  'Query.transcriptEvaluationResultsOverTime': {
    op: `query($id: ID!) { transcriptEvaluationResultsOverTime(evaluationID: $id, startTime: "2026-01-01T00:00:00Z", endTime: "2026-01-08T00:00:00Z") { total } }`,
    ids: { evaluationID: 'evaluation' },
    vars: (v) => ({ id: v.evaluationID }),
  },
  'Query.transcriptEvaluationEstimate': {
    op: `query($i: EstimateTranscriptEvaluationsInput!) { transcriptEvaluationEstimate(input: $i) { totalCost } }`,
    ids: {
      'input.projectID': 'project',
      'input.evaluationIDs': 'evaluation',
      'input.criteria.environmentID': 'environment',
      'input.criteria.filters.id': 'property',
    },
    labels: ['input.criteria.sessionID', 'input.criteria.userID'],
    filters: ['input.criteria.environmentID'],
    vars: (v) => ({
      i: {
        projectID: v['input.projectID'],
        evaluationIDs: [v['input.evaluationIDs']],
        criteria: {
          environmentID: v['input.criteria.environmentID'],
          filters: [{ id: v['input.criteria.filters.id'], op: 'exists' }],
        },
      },
    }),
  },
  'Query.transcriptEvaluations': {
    op: `query($p: ID!) { transcriptEvaluations(projectID: $p) { id } }`,
    ids: { projectID: 'project' },
    vars: (v) => ({ p: v.projectID }),
  },
  'Query.transcriptProperties': {
    op: `query($p: ID!) { transcriptProperties(projectID: $p) { id } }`,
    ids: { projectID: 'project' },
    vars: (v) => ({ p: v.projectID }),
  },
  'Query.transcriptProperty': {
    op: `query($id: ID!) { transcriptProperty(id: $id) { id } }`,
    ids: { id: 'property' },
    vars: (v) => ({ id: v.id }),
  },
  'Query.transcriptPropertyValues': {
    op: `query($t: ID!) { transcriptPropertyValues(transcriptID: $t) { id } }`,
    ids: { transcriptID: 'transcript' },
    vars: (v) => ({ t: v.transcriptID }),
  },
  'Query.transcriptRedactionPatterns': {
    op: `query($p: ID!) { transcriptRedactionPatterns(projectID: $p) }`,
    ids: { projectID: 'project' },
    vars: (v) => ({ p: v.projectID }),
  },
  'Query.transcripts': {
    op: `query($p: ID!, $c: TranscriptSearchCriteria) { transcripts(projectID: $p, criteria: $c) { edges { node { id } } } }`,
    ids: { projectID: 'project', 'criteria.environmentID': 'environment', 'criteria.filters.id': 'evaluation' },
    labels: ['criteria.sessionID', 'criteria.userID'],
    filters: ['criteria.environmentID'],
    vars: (v) => ({
      p: v.projectID,
      c: { environmentID: v['criteria.environmentID'], filters: [{ id: v['criteria.filters.id'], op: 'exists' }] },
    }),
  },
  'Query.webChatSettings': {
    op: `query($p: ID!, $e: String) { webChatSettings(projectID: $p, environment: $e) { enabled } }`,
    ids: { projectID: 'project', environment: 'environment' },
    vars: (v) => ({ p: v.projectID, e: v.environment }),
  },
  'Query.webChatFeedback': {
    op: `query($p: ID!, $e: String) { webChatFeedback(projectID: $p, environment: $e) { total } }`,
    ids: { projectID: 'project', environment: 'environment' },
    vars: (v) => ({ p: v.projectID, e: v.environment }),
  },
  'Query.usage': {
    op: `query($f: UsageFilterInput!) { usage(name: interactions, filter: $f) { __typename } }`,
    ids: { 'filter.projectID': 'project', 'filter.projectEnvironmentIDOrAlias': 'environment' },
    vars: (v) => ({
      f: { projectID: v['filter.projectID'], projectEnvironmentIDOrAlias: v['filter.projectEnvironmentIDOrAlias'] },
    }),
  },
  'Query.usageTimeSeries': {
    op: `query($f: UsageRangeInput!) { usageTimeSeries(name: interactions, filter: $f) { name } }`,
    ids: { 'filter.projectID': 'project', 'filter.projectEnvironmentIDOrAlias': 'environment' },
    vars: (v) => ({
      f: {
        projectID: v['filter.projectID'],
        projectEnvironmentIDOrAlias: v['filter.projectEnvironmentIDOrAlias'],
        startTime: '2026-01-01T00:00:00Z',
        endTime: '2026-01-01T05:00:00Z',
      },
    }),
  },
  'Query.usageSummary': {
    op: `query($q: [UsageSummaryQueryInput!]!) { usageSummary(queries: $q) { name } }`,
    ids: { 'queries.filter.projectID': 'project' },
    vars: (v) => ({ q: [{ name: 'sessions', filter: { projectID: v['queries.filter.projectID'] } }] }),
  },
  'Query.usageTotals': {
    op: `query($f: UsageRangeInput!) { usageTotals(filter: $f) { __typename } }`,
    ids: { 'filter.projectID': 'project', 'filter.projectEnvironmentIDOrAlias': 'environment' },
    vars: (v) => ({
      f: { projectID: v['filter.projectID'], projectEnvironmentIDOrAlias: v['filter.projectEnvironmentIDOrAlias'] },
    }),
  },

  // ── Mutations ──
  'Mutation.appendTranscriptLogs': {
    op: `mutation($t: ID!) { appendTranscriptLogs(transcriptID: $t, logs: [{ type: action, data: { type: "launch" } }]) { transcriptID } }`,
    ids: { transcriptID: 'transcript' },
    vars: (v) => ({ t: v.transcriptID }),
  },
  'Mutation.createApiKey': {
    op: `mutation($i: CreateApiKeyInput!) { createApiKey(input: $i) { apiKey } }`,
    ids: { 'input.projectID': 'project', 'input.workspaceID': 'workspace' },
    vars: (v) =>
      v.$at === 'input.projectID'
        ? { i: { projectID: v['input.projectID'], scopes: ['kb:read'] } }
        : { i: { workspaceID: v['input.workspaceID'], scopes: ['kb:read'] } },
  },
  'Mutation.updateWebChatSettings': {
    op: `mutation($p: ID!, $e: String) { updateWebChatSettings(projectID: $p, environment: $e, input: { title: "cross" }) { title } }`,
    ids: { projectID: 'project', environment: 'environment' },
    vars: (v) => ({ p: v.projectID, e: v.environment }),
  },
  'Mutation.createEnvironment': {
    op: `mutation($p: ID!) { createEnvironment(projectID: $p, alias: "cross-tenant") { id } }`,
    ids: { projectID: 'project' },
    vars: (v) => ({ p: v.projectID }),
  },
  'Mutation.createProject': {
    op: `mutation($w: ID) { createProject(input: { name: "cross", workspaceID: $w }) { apiKey } }`,
    ids: { 'input.workspaceID': 'workspace' },
    vars: (v) => ({ w: v['input.workspaceID'] }),
  },
  'Mutation.createTranscript': {
    op: `mutation($i: CreateTranscriptInput!) { createTranscript(input: $i) { id } }`,
    ids: { 'input.projectID': 'project', 'input.environment': 'environment' },
    labels: ['input.sessionID', 'input.userID'],
    vars: (v) => ({ i: { projectID: v['input.projectID'], environment: v['input.environment'], sessionID: 'cross' } }),
  },
  'Mutation.createTranscriptEvaluation': {
    op: `mutation($i: CreateTranscriptEvaluationInput!) { createTranscriptEvaluation(input: $i) { id } }`,
    ids: { 'input.projectID': 'project' },
    vars: (v) => ({
      i: {
        projectID: v['input.projectID'],
        name: 'cross',
        type: 'boolean',
        prompt: 'ok?',
        truePrompt: 'yes',
        falsePrompt: 'no',
      },
    }),
  },
  'Mutation.createTranscriptProperty': {
    op: `mutation($i: CreateTranscriptPropertyInput!) { createTranscriptProperty(input: $i) { id } }`,
    ids: { 'input.projectID': 'project' },
    vars: (v) => ({ i: { projectID: v['input.projectID'], name: 'cross', type: 'string' } }),
  },
  'Mutation.deleteKnowledgeBaseDocument': {
    op: `mutation($d: ID!) { deleteKnowledgeBaseDocument(documentID: $d) }`,
    ids: { documentID: 'document' },
    vars: (v) => ({ d: v.documentID }),
  },
  'Mutation.deleteRuntimeState': {
    op: `mutation($p: ID!, $e: String) { deleteRuntimeState(projectID: $p, userID: "u", environment: $e) }`,
    ids: { projectID: 'project', environment: 'environment' },
    labels: ['userID'],
    vars: (v) => ({ p: v.projectID, e: v.environment }),
  },
  'Mutation.deleteTranscript': {
    op: `mutation($id: ID!) { deleteTranscript(id: $id) }`,
    ids: { id: 'transcript' },
    vars: (v) => ({ id: v.id }),
  },
  'Mutation.deleteTranscriptEvaluation': {
    op: `mutation($id: ID!) { deleteTranscriptEvaluation(id: $id) }`,
    ids: { id: 'evaluation' },
    vars: (v) => ({ id: v.id }),
  },
  'Mutation.deleteTranscriptProperty': {
    op: `mutation($id: ID!) { deleteTranscriptProperty(id: $id) }`,
    ids: { id: 'property' },
    vars: (v) => ({ id: v.id }),
  },
  'Mutation.deleteTranscriptPropertyValue': {
    op: `mutation($t: ID!, $p: ID!) { deleteTranscriptPropertyValue(transcriptID: $t, propertyID: $p) }`,
    ids: { transcriptID: 'transcript', propertyID: 'property' },
    vars: (v) => ({ t: v.transcriptID, p: v.propertyID }),
  },
  'Mutation.createIntegration': {
    op: `mutation($p: ID!) { createIntegration(input: { projectID: $p, name: "cross", url: "https://mcp.example.com/mcp" }) { id } }`,
    ids: { 'input.projectID': 'project' },
    vars: (v) => ({ p: v['input.projectID'] }),
  },
  'Mutation.updateIntegration': {
    op: `mutation($p: ID!, $i: ID!) { updateIntegration(projectID: $p, id: $i, input: { url: "https://mcp.example.com/other" }) { id } }`,
    ids: { projectID: 'project', id: 'integration' },
    vars: (v) => ({ p: v.projectID, i: v.id }),
  },
  'Mutation.deleteIntegration': {
    op: `mutation($p: ID!, $i: ID!) { deleteIntegration(projectID: $p, id: $i) { id } }`,
    ids: { projectID: 'project', id: 'integration' },
    vars: (v) => ({ p: v.projectID, i: v.id }),
  },
  'Mutation.deployAgentVersion': {
    op: `mutation($p: ID!, $v: ID!, $e: String!) { deployAgentVersion(projectID: $p, versionID: $v, environment: $e) { updatedAt } }`,
    ids: { projectID: 'project', versionID: 'version', environment: 'environment' },
    vars: (v) => ({ p: v.projectID, v: v.versionID, e: v.environment }),
  },
  'Mutation.endTranscript': {
    op: `mutation($p: ID!, $t: ID!) { endTranscript(projectID: $p, transcriptID: $t) { transcriptID } }`,
    ids: { projectID: 'project', transcriptID: 'transcript' },
    vars: (v) => ({ p: v.projectID, t: v.transcriptID }),
  },
  'Mutation.interact': {
    op: `mutation($p: ID!, $e: String) { interact(projectID: $p, userID: "u", environment: $e, request: { action: { type: "launch" } }) { turnID } }`,
    ids: { projectID: 'project', environment: 'environment' },
    labels: ['userID', 'request.sessionID'],
    vars: (v) => ({ p: v.projectID, e: v.environment }),
  },
  'Mutation.publishAgent': {
    op: `mutation($i: PublishAgentInput!) { publishAgent(input: $i) { created } }`,
    ids: { 'input.projectID': 'project', 'input.environment': 'environment' },
    vars: (v) => ({ i: { projectID: v['input.projectID'], environment: v['input.environment'], program } }),
  },
  'Mutation.queueTranscriptEvaluations': {
    op: `mutation($i: QueueTranscriptEvaluationsInput!) { queueTranscriptEvaluations(input: $i) { transcriptCount } }`,
    ids: { 'input.projectID': 'project', 'input.evaluationIDs': 'evaluation', 'input.transcriptIDs': 'transcript' },
    vars: (v) => ({
      i: {
        projectID: v['input.projectID'],
        evaluationIDs: [v['input.evaluationIDs']],
        transcriptIDs: [v['input.transcriptIDs']],
      },
    }),
  },
  'Mutation.recordUsageEvents': {
    op: `mutation($e: [UsageEventInput!]!) { recordUsageEvents(events: $e) { recorded } }`,
    ids: { 'events.projectID': 'project', 'events.environment': 'environment' },
    // What another runtime says about its own events: names, not references to Parley's resources.
    labels: [
      'events.agentID',
      'events.apiToolID',
      'events.diagramID',
      'events.documentID',
      'events.eventID',
      'events.functionID',
      'events.nodeID',
      'events.transcriptID',
      'events.userID',
    ],
    vars: (v) => ({
      e: [{ projectID: v['events.projectID'], environment: v['events.environment'], kind: 'transcript' }],
    }),
  },
  'Mutation.recordUsageEventBatch': {
    op: `mutation($e: JSON!) { recordUsageEventBatch(events: $e) { recorded } }`,
    ids: { 'events.projectID': 'project', 'events.environment': 'environment' },
    // What another runtime says about its own events: names, not references to Parley's resources.
    labels: [
      'events.agentID',
      'events.apiToolID',
      'events.diagramID',
      'events.documentID',
      'events.eventID',
      'events.functionID',
      'events.nodeID',
      'events.transcriptID',
      'events.userID',
    ],
    vars: (v) => ({
      e: [{ projectID: v['events.projectID'], environment: v['events.environment'], kind: 'transcript' }],
    }),
  },
  'Query.knowledgeBaseTag': {
    op: `query($t: ID!) { knowledgeBaseTag(tagID: $t) { tagID label } }`,
    ids: { tagID: 'tag' },
    vars: (v) => ({ t: v.tagID }),
  },
  'Query.knowledgeBaseTags': {
    op: `query($p: ID) { knowledgeBaseTags(projectID: $p) { tagID } }`,
    ids: { projectID: 'project' },
    vars: (v) => ({ p: v.projectID }),
  },
  'Mutation.createKnowledgeBaseTag': {
    op: `mutation($p: ID) { createKnowledgeBaseTag(projectID: $p, label: "cross") { tagID } }`,
    ids: { projectID: 'project' },
    vars: (v) => ({ p: v.projectID }),
  },
  'Mutation.updateKnowledgeBaseTag': {
    op: `mutation($t: ID!) { updateKnowledgeBaseTag(tagID: $t, label: "renamed") { tagID } }`,
    ids: { tagID: 'tag' },
    vars: (v) => ({ t: v.tagID }),
  },
  'Mutation.deleteKnowledgeBaseTag': {
    op: `mutation($t: ID!) { deleteKnowledgeBaseTag(tagID: $t) }`,
    ids: { tagID: 'tag' },
    vars: (v) => ({ t: v.tagID }),
  },
  'Mutation.attachKnowledgeBaseTags': {
    op: `mutation($d: ID!) { attachKnowledgeBaseTags(documentID: $d, tags: ["seed"]) { documentID } }`,
    ids: { documentID: 'document' },
    vars: (v) => ({ d: v.documentID }),
  },
  'Mutation.detachKnowledgeBaseTags': {
    op: `mutation($d: ID!) { detachKnowledgeBaseTags(documentID: $d, tags: ["seed"]) { documentID } }`,
    ids: { documentID: 'document' },
    vars: (v) => ({ d: v.documentID }),
  },
  'Mutation.replaceKnowledgeBaseUrl': {
    op: `mutation($d: ID!) { replaceKnowledgeBaseUrl(documentID: $d, url: "https://example.com/doc") { documentID } }`,
    ids: { documentID: 'document' },
    vars: (v) => ({ d: v.documentID }),
  },
  'Mutation.updateKnowledgeBaseChunkMetadata': {
    op: `mutation($d: ID!, $c: ID!) { updateKnowledgeBaseChunkMetadata(documentID: $d, chunkID: $c, metadata: { k: 1 }) { documentID } }`,
    ids: { documentID: 'document', chunkID: 'chunk' },
    vars: (v) => ({ d: v.documentID, c: v.chunkID }),
  },
  'Mutation.replaceKnowledgeBaseDocument': {
    op: `mutation($d: ID!) { replaceKnowledgeBaseDocument(documentID: $d, url: "https://example.com/doc") { documentID } }`,
    ids: { documentID: 'document' },
    vars: (v) => ({ d: v.documentID }),
  },
  'Mutation.replaceRuntimeState': {
    op: `mutation($p: ID!, $e: String) { replaceRuntimeState(projectID: $p, userID: "u", environment: $e, state: { stack: [], storage: {}, variables: {} }) }`,
    ids: { projectID: 'project', environment: 'environment' },
    labels: ['userID'],
    vars: (v) => ({ p: v.projectID, e: v.environment }),
  },
  'Mutation.revokeApiKey': {
    op: `mutation($id: ID!) { revokeApiKey(id: $id) { id } }`,
    ids: { id: 'apiKey' },
    vars: (v) => ({ id: v.id }),
  },
  'Mutation.rotateApiKey': {
    op: `mutation($id: ID!) { rotateApiKey(id: $id) { apiKey } }`,
    ids: { id: 'apiKey' },
    vars: (v) => ({ id: v.id }),
  },
  'Mutation.runTranscriptEvaluation': {
    op: `mutation($p: ID!, $e: ID!, $t: ID!) { runTranscriptEvaluation(projectID: $p, evaluationID: $e, transcriptID: $t) { status } }`,
    ids: { projectID: 'project', evaluationID: 'evaluation', transcriptID: 'transcript' },
    vars: (v) => ({ p: v.projectID, e: v.evaluationID, t: v.transcriptID }),
  },
  'Mutation.setTranscriptPropertyValue': {
    op: `mutation($i: SetTranscriptPropertyValueInput!) { setTranscriptPropertyValue(input: $i) { value } }`,
    ids: { 'input.propertyID': 'property', 'input.transcriptID': 'transcript' },
    vars: (v) => ({ i: { propertyID: v['input.propertyID'], transcriptID: v['input.transcriptID'], value: 'x' } }),
  },
  'Mutation.setTranscriptRedactionPatterns': {
    op: `mutation($p: ID!) { setTranscriptRedactionPatterns(projectID: $p, patterns: ["secret"]) }`,
    ids: { projectID: 'project' },
    vars: (v) => ({ p: v.projectID }),
  },
  'Mutation.updateKnowledgeBaseDocumentMetadata': {
    op: `mutation($d: ID!) { updateKnowledgeBaseDocumentMetadata(documentID: $d, metadata: { tag: "x" }) { documentID } }`,
    ids: { documentID: 'document' },
    vars: (v) => ({ d: v.documentID }),
  },
  'Mutation.updateRuntimeVariables': {
    op: `mutation($p: ID!, $e: String) { updateRuntimeVariables(projectID: $p, userID: "u", environment: $e, variables: { a: 1 }) }`,
    ids: { projectID: 'project', environment: 'environment' },
    labels: ['userID'],
    vars: (v) => ({ p: v.projectID, e: v.environment }),
  },
  'Mutation.updateTranscriptEvaluation': {
    op: `mutation($id: ID!) { updateTranscriptEvaluation(id: $id, input: { name: "renamed" }) { id } }`,
    ids: { id: 'evaluation' },
    vars: (v) => ({ id: v.id }),
  },
  'Mutation.updateTranscriptProperty': {
    op: `mutation($id: ID!) { updateTranscriptProperty(id: $id, input: { name: "renamed" }) { id } }`,
    ids: { id: 'property' },
    vars: (v) => ({ id: v.id }),
  },
  'Mutation.uploadKnowledgeBaseFile': {
    op: `mutation($file: File!, $p: ID, $e: String) { uploadKnowledgeBaseFile(file: $file, projectID: $p, environment: $e) { documentID } }`,
    ids: { projectID: 'project', environment: 'environment' },
    file: true,
    vars: (v) => ({ file: null, p: v.projectID, e: v.environment }),
  },
  'Mutation.uploadKnowledgeBaseTable': {
    op: `mutation($p: ID, $e: String) { uploadKnowledgeBaseTable(projectID: $p, environment: $e, input: { name: "t", schema: { searchableFields: ["q"] }, items: [{ q: "x" }] }) { documentID } }`,
    ids: { projectID: 'project', environment: 'environment' },
    vars: (v) => ({ p: v.projectID, e: v.environment }),
  },
  'Mutation.uploadKnowledgeBaseUrl': {
    op: `mutation($p: ID, $e: String) { uploadKnowledgeBaseUrl(projectID: $p, environment: $e, url: "https://example.com/page") { documentID } }`,
    ids: { projectID: 'project', environment: 'environment' },
    vars: (v) => ({ p: v.projectID, e: v.environment }),
  },

  // ── Subscriptions (over server-sent events; refused before the first event) ──
  'Subscription.auditEvents': {
    op: `subscription($w: ID) { auditEvents(workspaceID: $w) { id } }`,
    ids: { workspaceID: 'workspace' },
    vars: (v) => ({ w: v.workspaceID }),
  },
  'Subscription.interact': {
    op: `subscription($p: ID!, $e: String) { interact(projectID: $p, userID: "u", environment: $e, request: { action: { type: "launch" } }) { event } }`,
    ids: { projectID: 'project', environment: 'environment' },
    labels: ['userID', 'request.sessionID'],
    vars: (v) => ({ p: v.projectID, e: v.environment }),
  },
  'Subscription.knowledgeBaseAnswer': {
    op: `subscription($i: KnowledgeBaseQueryInput!) { knowledgeBaseAnswer(input: $i) { type } }`,
    ids: { 'input.projectID': 'project', 'input.environment': 'environment' },
    vars: (v) => ({ i: { question: 'q', projectID: v['input.projectID'], environment: v['input.environment'] } }),
  },
  'Subscription.transcriptEvents': {
    op: `subscription($t: ID!) { transcriptEvents(transcriptID: $t) { kind } }`,
    ids: { transcriptID: 'transcript' },
    vars: (v) => ({ t: v.transcriptID }),
  },
  'Subscription.usageCounters': {
    op: `subscription($p: ID!) { usageCounters(projectID: $p) { __typename } }`,
    ids: { projectID: 'project' },
    vars: (v) => ({ p: v.projectID }),
  },
};

const state = { stack: [], storage: {}, variables: {} };
const evaluationBody = (projectID: string) => ({
  projectID,
  name: 'cross',
  type: 'boolean',
  prompt: 'ok?',
  truePrompt: 'yes',
  falsePrompt: 'no',
});

const restCases: Record<string, RestCase> = {
  'GET /v1/environment/project/:projectID': {
    ids: { projectID: 'project' },
    req: (v) => ({ path: `/v1/environment/project/${v.projectID}` }),
  },
  'POST /v1/environment': {
    ids: { projectID: 'project' },
    req: (v) => ({ path: '/v1/environment', body: { projectID: v.projectID, alias: 'cross-rest' } }),
  },
  'POST /v2/query/usage': {
    ids: { projectID: 'project', environment: 'environment' },
    req: (v) => ({
      path: '/v2/query/usage',
      body: {
        data: { name: 'interactions', filter: { projectID: v.projectID, projectEnvironmentIDOrAlias: v.environment } },
      },
    }),
  },
  'POST /v1/query/usage': {
    ids: { projectID: 'project' },
    req: (v) => ({
      path: '/v1/query/usage',
      body: { query: [{ name: 'interactions', filter: { projectID: [v.projectID] } }] },
    }),
  },
  'POST /v1/usage/events': {
    ids: { projectID: 'project', environment: 'environment' },
    req: (v) => ({
      path: '/v1/usage/events',
      body: { events: [{ projectID: v.projectID, environment: v.environment, kind: 'transcript' }] },
    }),
  },
  'POST /v2/project/:projectID/user/:userID/interact/stream': {
    ids: { projectID: 'project', environment: 'environment' },
    req: (v) => ({
      path: `/v2/project/${v.projectID}/user/u/interact/stream`,
      query: { environment: v.environment },
      body: { action: { type: 'launch' } },
    }),
  },
  'POST /v2beta1/interact/:projectID/:environment/stream': {
    ids: { projectID: 'project', environment: 'environment' },
    req: (v) => ({
      path: `/v2beta1/interact/${v.projectID}/${v.environment}/stream`,
      body: { action: { type: 'launch' }, session: { userID: 'u', sessionID: 's' } },
    }),
  },
  'POST /v2/project/:projectID/user/:userID/interact': {
    ids: { projectID: 'project', environment: 'environment', versionID: 'environment' },
    req: (v) => ({
      path: `/v2/project/${v.projectID}/user/u/interact`,
      // The environment in the query, or (position versionID) in SPEC.md's versionID header.
      ...(v.$at === 'versionID' ? { headers: { versionID: v.versionID } } : { query: { environment: v.environment } }),
      body: { action: { type: 'launch' } },
    }),
  },
  // The Dialog Manager API: the key names the project, the versionID header the environment.
  'POST /state/user/:userID/interact': {
    ids: { environment: 'environment' },
    req: (v) => ({
      path: '/state/user/u/interact',
      headers: { versionID: v.environment },
      body: { action: { type: 'launch' } },
    }),
  },
  'GET /state/user/:userID': {
    ids: { environment: 'environment' },
    req: (v) => ({ path: '/state/user/u', headers: { versionID: v.environment } }),
  },
  'PUT /state/user/:userID': {
    ids: { environment: 'environment' },
    req: (v) => ({ path: '/state/user/u', headers: { versionID: v.environment }, body: state }),
  },
  'DELETE /state/user/:userID': {
    ids: { environment: 'environment' },
    req: (v) => ({ path: '/state/user/u', headers: { versionID: v.environment } }),
  },
  'PATCH /state/user/:userID/variables': {
    ids: { environment: 'environment' },
    req: (v) => ({ path: '/state/user/u/variables', headers: { versionID: v.environment }, body: { x: 1 } }),
  },
  'GET /v2/project/:projectID/user/:userID/state': {
    ids: { projectID: 'project', environment: 'environment' },
    req: (v) => ({ path: `/v2/project/${v.projectID}/user/u/state`, query: { environment: v.environment } }),
  },
  'PUT /v2/project/:projectID/user/:userID/state': {
    ids: { projectID: 'project', environment: 'environment' },
    req: (v) => ({
      path: `/v2/project/${v.projectID}/user/u/state`,
      query: { environment: v.environment },
      body: state,
    }),
  },
  'DELETE /v2/project/:projectID/user/:userID/state': {
    ids: { projectID: 'project', environment: 'environment' },
    req: (v) => ({ path: `/v2/project/${v.projectID}/user/u/state`, query: { environment: v.environment } }),
  },
  'PATCH /v2/project/:projectID/user/:userID/state/variables': {
    ids: { projectID: 'project', environment: 'environment' },
    req: (v) => ({
      path: `/v2/project/${v.projectID}/user/u/state/variables`,
      query: { environment: v.environment },
      body: { a: 1 },
    }),
  },
  'POST /v1/transcript/project/:projectID': {
    ids: { projectID: 'project', environmentID: 'environment', 'filters.id': 'property' },
    filters: ['environmentID'],
    req: (v) => ({
      path: `/v1/transcript/project/${v.projectID}`,
      body: { environmentID: v.environmentID, filters: [{ id: v['filters.id'], op: 'exists' }] },
    }),
  },
  'GET /v1/transcript/:transcriptID': {
    ids: { transcriptID: 'transcript' },
    req: (v) => ({ path: `/v1/transcript/${v.transcriptID}` }),
  },
  'DELETE /v1/transcript/:transcriptID': {
    ids: { transcriptID: 'transcript' },
    req: (v) => ({ path: `/v1/transcript/${v.transcriptID}` }),
  },
  'POST /v1/transcript/:transcriptID/project/:projectID/end': {
    ids: { transcriptID: 'transcript', projectID: 'project' },
    req: (v) => ({ path: `/v1/transcript/${v.transcriptID}/project/${v.projectID}/end` }),
  },
  'POST /v1/transcript': {
    ids: { projectID: 'project', environment: 'environment' },
    req: (v) => ({
      path: '/v1/transcript',
      body: { projectID: v.projectID, environment: v.environment, sessionID: 'cross-rest' },
    }),
  },
  'POST /v1/transcript/:transcriptID/logs': {
    ids: { transcriptID: 'transcript' },
    req: (v) => ({
      path: `/v1/transcript/${v.transcriptID}/logs`,
      body: { logs: [{ type: 'action', data: { type: 'launch' } }] },
    }),
  },
  'GET /v1/transcript-property/project/:projectID': {
    ids: { projectID: 'project' },
    req: (v) => ({ path: `/v1/transcript-property/project/${v.projectID}` }),
  },
  'GET /v1/transcript-property/:propertyID': {
    ids: { propertyID: 'property' },
    req: (v) => ({ path: `/v1/transcript-property/${v.propertyID}` }),
  },
  'POST /v1/transcript-property': {
    ids: { projectID: 'project' },
    req: (v) => ({ path: '/v1/transcript-property', body: { projectID: v.projectID, name: 'cross', type: 'string' } }),
  },
  'PATCH /v1/transcript-property/:propertyID': {
    ids: { propertyID: 'property' },
    req: (v) => ({ path: `/v1/transcript-property/${v.propertyID}`, body: { name: 'renamed' } }),
  },
  'DELETE /v1/transcript-property/:propertyID': {
    ids: { propertyID: 'property' },
    req: (v) => ({ path: `/v1/transcript-property/${v.propertyID}` }),
  },
  'POST /v1/transcript-property-value': {
    ids: { propertyID: 'property', transcriptID: 'transcript' },
    req: (v) => ({
      path: '/v1/transcript-property-value',
      body: { propertyID: v.propertyID, transcriptID: v.transcriptID, value: 'x' },
    }),
  },
  'GET /v1/transcript-property-value/transcript/:transcriptID': {
    ids: { transcriptID: 'transcript' },
    req: (v) => ({ path: `/v1/transcript-property-value/transcript/${v.transcriptID}` }),
  },
  'DELETE /v1/transcript-property-value/transcript/:transcriptID/property/:propertyID': {
    ids: { transcriptID: 'transcript', propertyID: 'property' },
    req: (v) => ({ path: `/v1/transcript-property-value/transcript/${v.transcriptID}/property/${v.propertyID}` }),
  },
  'POST /v1/transcript-evaluation': {
    ids: { projectID: 'project' },
    req: (v) => ({ path: '/v1/transcript-evaluation', body: evaluationBody(v.projectID as string) }),
  },
  'PATCH /v1/transcript-evaluation/:evaluationID': {
    ids: { evaluationID: 'evaluation' },
    req: (v) => ({ path: `/v1/transcript-evaluation/${v.evaluationID}`, body: { name: 'renamed' } }),
  },
  'GET /v1/transcript-evaluation/project/:projectID': {
    ids: { projectID: 'project' },
    req: (v) => ({ path: `/v1/transcript-evaluation/project/${v.projectID}` }),
  },
  'GET /v1/transcript-evaluation/:evaluationID': {
    ids: { evaluationID: 'evaluation' },
    req: (v) => ({ path: `/v1/transcript-evaluation/${v.evaluationID}` }),
  },
  'DELETE /v1/transcript-evaluation/:evaluationID': {
    ids: { evaluationID: 'evaluation' },
    req: (v) => ({ path: `/v1/transcript-evaluation/${v.evaluationID}` }),
  },
  'POST /v1/transcript-evaluation/queue': {
    ids: { projectID: 'project', evaluationIDs: 'evaluation', transcriptIDs: 'transcript' },
    req: (v) => ({
      path: '/v1/transcript-evaluation/queue',
      body: { projectID: v.projectID, evaluationIDs: [v.evaluationIDs], transcriptIDs: [v.transcriptIDs] },
    }),
  },
  'POST /v1/transcript-evaluation/estimate': {
    ids: { projectID: 'project', evaluationIDs: 'evaluation' },
    req: (v) => ({
      path: '/v1/transcript-evaluation/estimate',
      body: { projectID: v.projectID, evaluationIDs: [v.evaluationIDs] },
    }),
  },
  'POST /v1/transcript-evaluation/:evaluationID/transcript/:transcriptID': {
    ids: { evaluationID: 'evaluation', transcriptID: 'transcript', projectID: 'project' },
    req: (v) => ({
      path: `/v1/transcript-evaluation/${v.evaluationID}/transcript/${v.transcriptID}`,
      body: { projectID: v.projectID },
    }),
  },
  'GET /v1/transcript-redaction/project/:projectID': {
    ids: { projectID: 'project' },
    req: (v) => ({ path: `/v1/transcript-redaction/project/${v.projectID}` }),
  },
  'PUT /v1/transcript-redaction/project/:projectID': {
    ids: { projectID: 'project' },
    req: (v) => ({ path: `/v1/transcript-redaction/project/${v.projectID}`, body: { patterns: ['secret'] } }),
  },
  'POST /v1/knowledge-base/docs/upload': {
    ids: { projectID: 'project' },
    req: (v) => ({
      path: '/v1/knowledge-base/docs/upload',
      query: { projectID: v.projectID },
      body: { data: { type: 'url', url: 'https://example.com/page' } },
    }),
  },
  'POST /v1/knowledge-base/docs/upload/table': {
    ids: { projectID: 'project' },
    req: (v) => ({
      path: '/v1/knowledge-base/docs/upload/table',
      query: { projectID: v.projectID },
      body: { data: { name: 't', schema: { searchableFields: ['q'] }, items: [{ q: 'x' }] } },
    }),
  },
  'POST /v1/knowledge-base/docs/upload/url': {
    ids: { projectID: 'project' },
    req: (v) => ({
      path: '/v1/knowledge-base/docs/upload/url',
      query: { projectID: v.projectID },
      body: { data: { type: 'url', url: 'https://example.com/page' } },
    }),
  },
  'PUT /v1/knowledge-base/docs/:documentID/upload/url': {
    ids: { documentID: 'document' },
    req: (v) => ({
      path: `/v1/knowledge-base/docs/${v.documentID}/upload/url`,
      body: { data: { type: 'url', url: 'https://example.com/doc' } },
    }),
  },
  'PATCH /v1/knowledge-base/docs/:documentID/chunk/:chunkID': {
    ids: { documentID: 'document', chunkID: 'chunk' },
    req: (v) => ({
      path: `/v1/knowledge-base/docs/${v.documentID}/chunk/${v.chunkID}`,
      body: { data: { metadata: { k: 1 } } },
    }),
  },
  'POST /v3alpha/knowledge-base/tags': {
    ids: { projectID: 'project' },
    req: (v) => ({
      path: '/v3alpha/knowledge-base/tags',
      query: { projectID: v.projectID },
      body: { data: { label: 'cross' } },
    }),
  },
  'GET /v3alpha/knowledge-base/tags': {
    ids: { projectID: 'project' },
    req: (v) => ({ path: '/v3alpha/knowledge-base/tags', query: { projectID: v.projectID } }),
  },
  'GET /v3alpha/knowledge-base/tags/:tagID': {
    ids: { tagID: 'tag' },
    req: (v) => ({ path: `/v3alpha/knowledge-base/tags/${v.tagID}` }),
  },
  'PATCH /v3alpha/knowledge-base/tags/:tagID': {
    ids: { tagID: 'tag' },
    req: (v) => ({ path: `/v3alpha/knowledge-base/tags/${v.tagID}`, body: { data: { label: 'renamed' } } }),
  },
  'DELETE /v3alpha/knowledge-base/tags/:tagID': {
    ids: { tagID: 'tag' },
    req: (v) => ({ path: `/v3alpha/knowledge-base/tags/${v.tagID}` }),
  },
  'POST /v3alpha/knowledge-base/docs/:documentID/tags/attach': {
    ids: { documentID: 'document' },
    req: (v) => ({
      path: `/v3alpha/knowledge-base/docs/${v.documentID}/tags/attach`,
      body: { data: { tags: ['seed'] } },
    }),
  },
  'POST /v3alpha/knowledge-base/docs/:documentID/tags/detach': {
    ids: { documentID: 'document' },
    req: (v) => ({
      path: `/v3alpha/knowledge-base/docs/${v.documentID}/tags/detach`,
      body: { data: { tags: ['seed'] } },
    }),
  },
  'GET /v1/knowledge-base/docs': {
    ids: { projectID: 'project' },
    req: (v) => ({ path: '/v1/knowledge-base/docs', query: { projectID: v.projectID } }),
  },
  'GET /v1/knowledge-base/docs/:documentID': {
    ids: { documentID: 'document' },
    req: (v) => ({ path: `/v1/knowledge-base/docs/${v.documentID}` }),
  },
  'PUT /v1/knowledge-base/docs/:documentID/upload': {
    ids: { documentID: 'document' },
    req: (v) => ({
      path: `/v1/knowledge-base/docs/${v.documentID}/upload`,
      body: { data: { type: 'url', url: 'https://example.com/doc' } },
    }),
  },
  'PATCH /v1/knowledge-base/docs/:documentID': {
    ids: { documentID: 'document' },
    req: (v) => ({ path: `/v1/knowledge-base/docs/${v.documentID}`, body: { data: { metadata: { tag: 'x' } } } }),
  },
  'DELETE /v1/knowledge-base/docs/:documentID': {
    ids: { documentID: 'document' },
    req: (v) => ({ path: `/v1/knowledge-base/docs/${v.documentID}` }),
  },
  'POST /v1/knowledge-base/query': {
    ids: { projectID: 'project', environment: 'environment' },
    req: (v) => ({
      path: '/v1/knowledge-base/query',
      body: { question: 'q', synthesis: false, projectID: v.projectID, environment: v.environment },
    }),
  },
  'POST /knowledge-base/query': {
    ids: { projectID: 'project', environment: 'environment' },
    req: (v) => ({
      path: '/knowledge-base/query',
      body: { question: 'q', synthesis: false, projectID: v.projectID, environment: v.environment },
    }),
  },
};

// ── The tables against the schema and the route table ──────────────────────────────────────────

const looksLikeId = (name: string) => /(^id$|ID$|IDs$|^environment$|IDOrAlias$)/.test(name);

/** Every argument path of a root field that is an ID or named like one, through input objects. */
function idPaths(prefix: string, arg: { name: string; type: GraphQLInputType }, seen: Set<string>): string[] {
  const named = getNamedType(arg.type);
  const here = `${prefix}${arg.name}`;
  const out = named.name === 'ID' || looksLikeId(arg.name) ? [here] : [];
  if (isInputObjectType(named) && !seen.has(named.name)) {
    const inner = new Set(seen).add(named.name);
    for (const f of Object.values(named.getFields())) out.push(...idPaths(`${here}.`, f, inner));
  }
  return out;
}

function idTakingFields(): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const root of [schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()]) {
    for (const field of Object.values(root!.getFields())) {
      const paths = field.args.flatMap((a) => idPaths('', a, new Set()));
      if (paths.length) found.set(`${root!.name}.${field.name}`, paths.sort());
    }
  }
  // Its events are one JSON value holding UsageEventInput objects (the field checks them), which
  // the walk cannot see into: the same ID paths as recordUsageEvents.
  found.set('Mutation.recordUsageEventBatch', found.get('Mutation.recordUsageEvents') ?? []);
  return found;
}

const routeKey = (r: { method: string; path: string }) => `${r.method} ${r.path}`;

function rootFieldOf(operation: string): string {
  const op = parse(operation).definitions[0] as OperationDefinitionNode;
  const type = op.operation === 'query' ? 'Query' : op.operation === 'mutation' ? 'Mutation' : 'Subscription';
  return `${type}.${(op.selectionSet.selections[0] as FieldNode).name.value}`;
}

describe('the cross-tenant tables', () => {
  it('have a row for every GraphQL field that takes an ID, naming each ID argument as a reference or a label', () => {
    const expected = Object.fromEntries(idTakingFields());
    const covered = Object.fromEntries(
      Object.entries(gqlCases).map(([name, c]) => [name, [...Object.keys(c.ids), ...(c.labels ?? [])].sort()]),
    );
    expect(covered).toEqual(expected);
  });

  it('have a row for every REST route that takes an ID, with each ID path parameter', () => {
    const fields = idTakingFields();
    const expected = routes
      .filter((r) => /:(\w*ID|environment)\b/.test(r.path) || fields.has(rootFieldOf(r.operation)))
      .map(routeKey)
      .sort();
    expect(Object.keys(restCases).sort()).toEqual(expected);
    for (const r of routes) {
      const params = [...r.path.matchAll(/:(\w+)/g)].map((m) => m[1]!).filter((p) => p !== 'userID');
      for (const p of params) expect(restCases[routeKey(r)]?.ids, `${routeKey(r)} :${p}`).toHaveProperty(p);
    }
  });
});

// ── The requests ────────────────────────────────────────────────────────────────────────────────

type Resources = Record<Kind, string>;

describeEachDatabase('another tenant’s resource answers as a missing one', (provider) => {
  const t = useTestApp(provider);
  const own = {} as Resources;
  const foreign = {} as Resources;
  const callers: { name: string; key: string }[] = [];
  let bystander = '';

  async function gqlAsOperator(query: string, variables: Record<string, unknown>) {
    const res = await t.app.gql(query, variables);
    if (res.body.errors) throw new Error(`${query}: ${JSON.stringify(res.body.errors)}`);
    return res.body.data;
  }

  /** A project with one resource of each kind; returns their IDs. */
  async function seed(workspaceId?: string): Promise<Resources> {
    const p = await t.app.createProject({ workspaceId });
    const key = await createApiKey(
      { db: t.app.services.db, pubsub: t.app.services.pubsub },
      { workspaceId: p.workspaceID, projectId: p.projectID, scopes: ['kb:read'], actor: 'cli' },
    );
    const transcript = await gqlAsOperator(
      `mutation($p: ID!) { createTranscript(input: { projectID: $p, sessionID: "seed" }) { id } }`,
      { p: p.projectID },
    );
    const property = await gqlAsOperator(
      `mutation($p: ID!) { createTranscriptProperty(input: { projectID: $p, name: "seed", type: string }) { id } }`,
      { p: p.projectID },
    );
    const evaluation = await gqlAsOperator(
      `mutation($i: CreateTranscriptEvaluationInput!) { createTranscriptEvaluation(input: $i) { id } }`,
      { i: { ...evaluationBody(p.projectID), name: 'seed' } },
    );
    const document = await gqlAsOperator(
      `mutation($p: ID) { uploadKnowledgeBaseTable(projectID: $p, wait: true, tags: ["seed"], input: { name: "seed", schema: { searchableFields: ["q"] }, items: [{ q: "x" }] }) { documentID chunks { chunkID } } }`,
      { p: p.projectID },
    );
    const tag = await gqlAsOperator(`query($p: ID) { knowledgeBaseTags(projectID: $p) { tagID } }`, { p: p.projectID });
    const published = await publish(t.app, p.projectID, program);
    const integration = await gqlAsOperator(
      `mutation($p: ID!) { createIntegration(input: { projectID: $p, name: "seed", url: "https://mcp.example.com/mcp" }) { id } }`,
      { p: p.projectID },
    );
    return {
      project: p.projectID,
      workspace: p.workspaceID,
      environment: p.environments.find((e) => e.alias === 'production')!.id,
      transcript: transcript.createTranscript.id,
      property: property.createTranscriptProperty.id,
      evaluation: evaluation.createTranscriptEvaluation.id,
      document: document.uploadKnowledgeBaseTable.documentID,
      chunk: document.uploadKnowledgeBaseTable.chunks[0].chunkID,
      tag: tag.knowledgeBaseTags[0].tagID,
      version: published.version.id,
      apiKey: key.key.id,
      integration: integration.createIntegration.id,
    };
  }

  /** Everything stored for project B, to show that no request changed it. */
  async function snapshotOf(r: Resources) {
    const prisma = t.app.services.db.prisma;
    const where = { projectId: r.project };
    return JSON.stringify([
      await prisma.project.findUnique({ where: { id: r.project } }),
      await prisma.environment.findMany({ where, orderBy: { id: 'asc' } }),
      await prisma.transcript.findMany({ where, orderBy: { id: 'asc' } }),
      await prisma.transcriptLog.findMany({ where: { transcript: where }, orderBy: { id: 'asc' } }),
      await prisma.transcriptProperty.findMany({ where, orderBy: { id: 'asc' } }),
      await prisma.transcriptPropertyValue.findMany({ where: { transcript: where }, orderBy: { propertyId: 'asc' } }),
      await prisma.transcriptRedactionPattern.findMany({ where, orderBy: { id: 'asc' } }),
      await prisma.evaluation.findMany({ where, orderBy: { id: 'asc' } }),
      await prisma.evaluationResult.findMany({ where: { evaluation: where }, orderBy: { transcriptId: 'asc' } }),
      await prisma.kbDocument.findMany({ where, orderBy: { id: 'asc' } }),
      await prisma.kbChunk.findMany({ where, orderBy: { seq: 'asc' } }),
      await prisma.kbTag.findMany({ where, orderBy: { id: 'asc' } }),
      await prisma.kbDocumentTag.findMany({ where: { tag: where }, orderBy: { tagId: 'asc' } }),
      await prisma.agentVersion.findMany({ where, orderBy: { id: 'asc' } }),
      await prisma.integration.findMany({ where, orderBy: { id: 'asc' } }),
      await prisma.agentDeployment.findMany({ where: { environment: where }, orderBy: { environmentId: 'asc' } }),
      await prisma.apiKey.findMany({ where: { workspaceId: r.workspace }, orderBy: { id: 'asc' } }),
      await prisma.usageEvent.count({ where }),
      await prisma.project.count({ where: { workspaceId: r.workspace } }),
    ]);
  }

  beforeAll(async () => {
    Object.assign(own, await seed());
    Object.assign(foreign, await seed());
    const deps = { db: t.app.services.db, pubsub: t.app.services.pubsub };
    const projectKey = await createApiKey(deps, {
      workspaceId: own.workspace,
      projectId: own.project,
      scopes: [...allScopes],
      actor: 'cli',
    });
    const workspaceKey = await createApiKey(deps, {
      workspaceId: own.workspace,
      projectId: null,
      scopes: [...allScopes],
      actor: 'cli',
    });
    callers.push(
      { name: "project A's key with every scope", key: projectKey.apiKey },
      { name: "workspace A's admin key with every scope", key: workspaceKey.apiKey },
    );
    bystander = await snapshotOf(foreign);
  });

  /** The values of one request: `value` at `at`, the caller's own resource at every other position. */
  function valuesFor(ids: Record<string, Kind>, at: string, value: string): Values {
    const values: Values = { $at: at };
    for (const [position, kind] of Object.entries(ids)) values[position] = position === at ? value : own[kind];
    return values;
  }

  async function sendGql(key: string, c: GqlCase, values: Values) {
    const body = JSON.stringify({ query: c.op, variables: c.vars(values) });
    const subscription = c.op.startsWith('subscription');
    let init: RequestInit;
    if (c.file) {
      const form = new FormData();
      form.append('operations', body);
      form.append('map', JSON.stringify({ 0: ['variables.file'] }));
      form.append('0', new Blob(['A few words.']), 'cross.txt');
      init = { method: 'POST', headers: { authorization: key }, body: form };
    } else {
      init = {
        method: 'POST',
        headers: {
          authorization: key,
          'content-type': 'application/json',
          accept: subscription ? 'text/event-stream' : 'application/json',
        },
        body,
      };
    }
    // A refused subscription ends its stream at once; one that was let through would stay open.
    const res = await fetch(`${t.app.url}/graphql`, { ...init, signal: AbortSignal.timeout(20_000) });
    return { status: res.status, text: await res.text() };
  }

  async function sendRest(key: string, method: string, c: RestCase, values: Values) {
    const r = c.req(values);
    const defined = (o: Record<string, string | undefined> = {}) =>
      Object.fromEntries(Object.entries(o).filter((e): e is [string, string] => e[1] !== undefined));
    const res = await t.app.http(method, r.path, {
      key,
      body: r.body,
      query: defined(r.query),
      headers: defined(r.headers),
    });
    return { status: res.status, text: res.text };
  }

  function expectSameAnswer(
    label: string,
    got: { foreign: { status: number; text: string }; madeUp: { status: number; text: string } },
    ids: { foreign: string; madeUp: string },
    filter: boolean,
  ) {
    // The made-up ID is refused (or, for a search filter, matches nothing): the request reached the ID.
    if (filter) expect(got.madeUp.status, label).toBe(200);
    else expect(got.madeUp.status, `${label}: ${got.madeUp.text}`).toBeGreaterThanOrEqual(400);
    const blank = (text: string, id: string) => text.split(id).join('<ID>');
    expect({ status: got.foreign.status, body: blank(got.foreign.text, ids.foreign) }, label).toEqual({
      status: got.madeUp.status,
      body: blank(got.madeUp.text, ids.madeUp),
    });
    // Nothing about project B may show in the answer.
    for (const id of Object.values(foreign)) {
      if (id !== ids.foreign) expect(got.foreign.text, `${label}: mentions ${id}`).not.toContain(id);
    }
  }

  for (const [field, c] of Object.entries(gqlCases)) {
    it(`GraphQL ${field}`, async () => {
      for (const caller of callers) {
        for (const [position, kind] of Object.entries(c.ids)) {
          const madeUp = newId();
          const foreignAnswer = await sendGql(caller.key, c, valuesFor(c.ids, position, foreign[kind]));
          const madeUpAnswer = await sendGql(caller.key, c, valuesFor(c.ids, position, madeUp));
          expectSameAnswer(
            `${field} ${position} (${caller.name})`,
            { foreign: foreignAnswer, madeUp: madeUpAnswer },
            { foreign: foreign[kind], madeUp },
            c.filters?.includes(position) ?? false,
          );
        }
      }
    });
  }

  for (const route of routes.filter((r) => restCases[routeKey(r)])) {
    const c = restCases[routeKey(route)]!;
    it(`REST ${routeKey(route)}`, async () => {
      for (const caller of callers) {
        for (const [position, kind] of Object.entries(c.ids)) {
          const madeUp = newId();
          const foreignAnswer = await sendRest(caller.key, route.method, c, valuesFor(c.ids, position, foreign[kind]));
          const madeUpAnswer = await sendRest(caller.key, route.method, c, valuesFor(c.ids, position, madeUp));
          expectSameAnswer(
            `${routeKey(route)} ${position} (${caller.name})`,
            { foreign: foreignAnswer, madeUp: madeUpAnswer },
            { foreign: foreign[kind], madeUp },
            c.filters?.includes(position) ?? false,
          );
        }
      }
    });
  }

  it("left project B's data as it was", async () => {
    expect(await snapshotOf(foreign)).toBe(bystander);
  });
});
