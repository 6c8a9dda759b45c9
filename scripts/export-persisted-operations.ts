/**
 * Prints a persisted-operations file (`{"<sha256 of the document>": "<document>"}`) holding the
 * documents of every REST route (`npm run graphql:persisted-operations [-- FILE ...]`). With file
 * arguments, their operations (same format, or an array of documents) are merged in: a deployment
 * that sets GRAPHQL_PERSISTED_ONLY=true starts from this and adds its clients' documents.
 */
import { loadPersistedOperations, restPersistedOperations } from '../src/graphql/plugins/protection';
import { routes } from '../src/rest/routes';

const operations: Record<string, string> = restPersistedOperations(routes);
for (const file of process.argv.slice(2)) {
  for (const [hash, document] of loadPersistedOperations(file).byHash) operations[hash] = document;
}
process.stdout.write(`${JSON.stringify(operations, null, 2)}\n`);
