// biome-ignore-all lint/a11y/noRedundantRoles: the API-key table is laid out as stacked blocks at narrow widths (styles.css, table.stack-narrow), which drops a table's implicit roles in Chromium; the explicit roles keep it a table for screen readers.
import { useState } from 'preact/hooks';
import { gql } from '../api';
import { useConsole } from '../context';
import { ConfirmButton, ErrorNote, Field, formatTime, inputValue, Loading, Section, useAsync } from '../ui';

const allScopes = [
  'analytics:read',
  'analytics:write',
  'transcripts:read',
  'transcripts:write',
  'runtime:interact',
  'kb:read',
  'kb:write',
  'admin',
];
const defaultScopes = allScopes.filter((s) => s !== 'admin' && s !== 'analytics:write');

interface Key {
  id: string;
  name: string | null;
  scopes: string[];
  createdAt: string;
  lastUsedAt: string | null;
  expiresAt: string | null;
  revokedAt: string | null;
}

const keyFields = 'id name scopes createdAt lastUsedAt expiresAt revokedAt';

function Secret({ secret, onDone }: { secret: string; onDone: () => void }) {
  return (
    <div class="secret" role="alert">
      <p>
        <strong>Copy this key now.</strong> It is shown once and never again.
      </p>
      <Field label="New API key">
        {(id) => <input id={id} readOnly value={secret} class="mono" onFocus={(e) => e.currentTarget.select()} />}
      </Field>
      <div class="row">
        <button type="button" onClick={() => navigator.clipboard?.writeText(secret)}>
          Copy key
        </button>
        <button type="button" onClick={onDone}>
          I have copied it
        </button>
      </div>
    </div>
  );
}

function ApiKeys() {
  const { project, viewer } = useConsole();
  const keys = useAsync(
    () => gql<{ apiKeys: Key[] }>(`query Keys($p: ID) { apiKeys(projectID: $p) { ${keyFields} } }`, { p: project.id }),
    [project.id],
  );
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<string[]>(defaultScopes);
  const [secret, setSecret] = useState<string | null>(null);
  const [grace, setGrace] = useState('86400');
  const [error, setError] = useState<unknown>(null);
  return (
    <Section title="API keys">
      {secret ? (
        <Secret
          secret={secret}
          onDone={() => {
            setSecret(null);
          }}
        />
      ) : null}
      <ErrorNote error={keys.error || error} />
      {keys.data ? (
        <div class="table-wrap">
          <table class="stack-narrow" role="table">
            <thead role="rowgroup">
              <tr role="row">
                <th scope="col" role="columnheader">
                  Key
                </th>
                <th scope="col" role="columnheader">
                  Scopes
                </th>
                <th scope="col" role="columnheader">
                  Last used
                </th>
                <th scope="col" role="columnheader">
                  State
                </th>
                <th scope="col" role="columnheader">
                  Actions
                </th>
              </tr>
            </thead>
            <tbody role="rowgroup">
              {keys.data.apiKeys.map((k) => (
                <tr key={k.id} role="row">
                  <td data-label="Key" role="cell">
                    {k.name ?? <span class="muted">(no name)</span>} <span class="mono muted">{k.id}</span>
                    {k.id === viewer.keyID ? <span class="badge">this session</span> : null}
                  </td>
                  <td class="scopes" data-label="Scopes" role="cell">
                    {k.scopes.join(', ')}
                  </td>
                  <td data-label="Last used" role="cell">
                    {formatTime(k.lastUsedAt)}
                  </td>
                  <td data-label="State" role="cell">
                    {k.revokedAt ? 'revoked' : k.expiresAt ? `expires ${formatTime(k.expiresAt)}` : 'active'}
                  </td>
                  <td class="row" data-label="Actions" role="cell">
                    {!k.revokedAt ? (
                      <>
                        <ConfirmButton
                          label={`Rotate ${k.name ?? k.id}`}
                          title="Rotate this key?"
                          message={`A new key replaces it; the old one keeps working for ${grace} seconds.`}
                          confirmLabel="Rotate"
                          onConfirm={async () => {
                            const data = await gql<{ rotateApiKey: { apiKey: string } }>(
                              'mutation Rotate($id: ID!, $g: Int!) { rotateApiKey(id: $id, graceSeconds: $g) { apiKey } }',
                              { id: k.id, g: Number(grace) },
                            );
                            setSecret(data.rotateApiKey.apiKey);
                            keys.reload();
                          }}
                        />
                        <ConfirmButton
                          label={`Revoke ${k.name ?? k.id}`}
                          title="Revoke this key?"
                          message="Requests with it fail from now on."
                          confirmLabel="Revoke"
                          danger
                          onConfirm={async () => {
                            await gql('mutation Revoke($id: ID!) { revokeApiKey(id: $id) { id } }', { id: k.id });
                            keys.reload();
                          }}
                        />
                      </>
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : (
        <Loading />
      )}
      <Field label="Grace period on rotation (seconds)">
        {(id) => <input id={id} type="number" min={0} value={grace} onInput={(e) => setGrace(inputValue(e))} />}
      </Field>
      <form
        class="stack"
        aria-label="Create an API key"
        onSubmit={async (e) => {
          e.preventDefault();
          setError(null);
          try {
            const data = await gql<{ createApiKey: { apiKey: string } }>(
              'mutation CreateKey($input: CreateApiKeyInput!) { createApiKey(input: $input) { apiKey } }',
              { input: { projectID: project.id, name: name || undefined, scopes } },
            );
            setSecret(data.createApiKey.apiKey);
            setName('');
            keys.reload();
          } catch (err) {
            setError(err);
          }
        }}
      >
        <h3>New key</h3>
        <Field label="Key name">{(id) => <input id={id} value={name} onInput={(e) => setName(inputValue(e))} />}</Field>
        <fieldset>
          <legend>Scopes</legend>
          {allScopes.map((s) => (
            <label class="inline" key={s}>
              <input
                type="checkbox"
                checked={scopes.includes(s)}
                onChange={() => setScopes(scopes.includes(s) ? scopes.filter((x) => x !== s) : [...scopes, s])}
              />{' '}
              {s}
            </label>
          ))}
        </fieldset>
        <button class="primary" type="submit" disabled={scopes.length === 0}>
          Create key
        </button>
      </form>
    </Section>
  );
}

function Environments() {
  const { project, can, reloadProject } = useConsole();
  const [alias, setAlias] = useState('');
  const [error, setError] = useState<unknown>(null);
  return (
    <Section title="Environments">
      <ul class="plain">
        {project.environments.map((env) => (
          <li key={env.id}>
            <strong>{env.alias}</strong> <span class="mono muted">{env.id}</span>
          </li>
        ))}
      </ul>
      {can('admin') ? (
        <form
          class="row"
          aria-label="Create an environment"
          onSubmit={async (e) => {
            e.preventDefault();
            setError(null);
            try {
              await gql(
                'mutation CreateEnv($p: ID!, $a: String!) { createEnvironment(projectID: $p, alias: $a) { id } }',
                {
                  p: project.id,
                  a: alias,
                },
              );
              setAlias('');
              reloadProject();
            } catch (err) {
              setError(err);
            }
          }}
        >
          <Field label="New environment">
            {(id) => <input id={id} required value={alias} onInput={(e) => setAlias(inputValue(e))} />}
          </Field>
          <button type="submit">Create environment</button>
        </form>
      ) : null}
      <ErrorNote error={error} />
    </Section>
  );
}

export function SettingsPage() {
  const { can, viewer, project } = useConsole();
  return (
    <div class="page">
      <h1>Settings</h1>
      <Section title="This session">
        <dl class="facts">
          <dt>Signed in as</dt>
          <dd>{viewer.kind === 'operator' ? 'the operator (admin token)' : `API key ${viewer.keyID}`}</dd>
          <dt>Project</dt>
          <dd>
            {project.name} <span class="mono muted">{project.id}</span>
          </dd>
          {viewer.kind === 'key' ? (
            <>
              <dt>Scopes</dt>
              <dd>{viewer.scopes.join(', ')}</dd>
            </>
          ) : null}
        </dl>
      </Section>
      <Environments />
      {can('admin') ? <ApiKeys /> : <p class="muted">Managing API keys needs a key with the admin scope.</p>}
    </div>
  );
}
