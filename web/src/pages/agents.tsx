import { useRef, useState } from 'preact/hooks';
import { ApiError, gql, subscribe } from '../api';
import { useConsole } from '../context';
import { href } from '../router';
import { ErrorNote, Field, formatTime, inputValue, JsonBlock, Loading, Section, useAsync } from '../ui';

interface Version {
  id: string;
  number: number;
  checksum: string;
  createdAt: string;
  createdBy: string;
  deployments: { environment: { id: string; alias: string } }[];
}

interface Agent {
  id: string;
  name: string;
  versions: Version[];
}

interface Problem {
  path: string;
  message: string;
  severity: string;
}

function AgentList() {
  const { project } = useConsole();
  const agents = useAsync(
    () =>
      gql<{ agents: Agent[] }>(
        `query Agents($projectID: ID!) { agents(projectID: $projectID) { id name versions { id number checksum createdAt createdBy deployments { environment { id alias } } } } }`,
        { projectID: project.id },
      ),
    [project.id],
  );
  const [error, setError] = useState<unknown>(null);
  return (
    <Section title="Agents and versions">
      <ErrorNote error={agents.error || error} />
      {!agents.data ? <Loading /> : null}
      {agents.data?.agents.length === 0 ? <p class="muted">No agent published yet.</p> : null}
      {agents.data?.agents.map((agent) => (
        <div key={agent.id} class="item">
          <h3>{agent.name}</h3>
          <div class="table-wrap">
            <table>
              <caption class="sr-only">Versions of {agent.name}</caption>
              <thead>
                <tr>
                  <th scope="col">Version</th>
                  <th scope="col">Published</th>
                  <th scope="col">Runs in</th>
                  <th scope="col">Deploy</th>
                </tr>
              </thead>
              <tbody>
                {agent.versions.map((v) => (
                  <tr key={v.id}>
                    <td>
                      v{v.number} <span class="muted mono">{v.checksum.slice(0, 8)}</span>
                    </td>
                    <td>
                      {formatTime(v.createdAt)} <span class="muted">by {v.createdBy}</span>
                    </td>
                    <td>{v.deployments.map((d) => d.environment.alias).join(', ') || '—'}</td>
                    <td class="row">
                      {project.environments
                        .filter((env) => !v.deployments.some((d) => d.environment.id === env.id))
                        .map((env) => (
                          <button
                            type="button"
                            key={env.id}
                            onClick={async () => {
                              setError(null);
                              try {
                                await gql(
                                  'mutation Deploy($p: ID!, $e: String!, $v: ID!) { deployAgentVersion(projectID: $p, environment: $e, versionID: $v) { updatedAt } }',
                                  { p: project.id, e: env.id, v: v.id },
                                );
                                agents.reload();
                              } catch (err) {
                                setError(err);
                              }
                            }}
                          >
                            Deploy v{v.number} to {env.alias}
                          </button>
                        ))}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </div>
      ))}
      <Publish onPublished={agents.reload} />
    </Section>
  );
}

function Publish({ onPublished }: { onPublished: () => void }) {
  const { project } = useConsole();
  const [text, setText] = useState('');
  const [environment, setEnvironment] = useState('development');
  const [problems, setProblems] = useState<Problem[] | null>(null);
  const [message, setMessage] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const parse = (): Record<string, unknown> | null => {
    try {
      const value = JSON.parse(text);
      if (!value || typeof value !== 'object' || Array.isArray(value))
        throw new Error('The program must be a JSON object.');
      return value;
    } catch (err) {
      setError(new Error(`The program is not valid JSON: ${(err as Error).message}`));
      return null;
    }
  };
  return (
    <form
      class="stack"
      aria-label="Publish a program"
      onSubmit={async (e) => {
        e.preventDefault();
        setError(null);
        setMessage(null);
        setProblems(null);
        const program = parse();
        if (!program) return;
        try {
          const check = await gql<{ validateAgentProgram: { valid: boolean; errors: Problem[]; warnings: Problem[] } }>(
            'query Validate($program: JSONObject!) { validateAgentProgram(program: $program) { valid errors { path message severity } warnings { path message severity } } }',
            { program },
          );
          const v = check.validateAgentProgram;
          setProblems([...v.errors, ...v.warnings]);
          if (!v.valid) return;
          const data = await gql<{
            publishAgent: {
              created: boolean;
              version: { number: number };
              agent: { name: string };
              environment: { alias: string };
            };
          }>(
            'mutation Publish($input: PublishAgentInput!) { publishAgent(input: $input) { created version { number } agent { name } environment { alias } } }',
            { input: { projectID: project.id, program, environment } },
          );
          const p = data.publishAgent;
          setMessage(
            `${p.agent.name} v${p.version.number} ${p.created ? 'published' : 'is unchanged (latest version reused)'} and runs in ${p.environment.alias}.`,
          );
          onPublished();
        } catch (err) {
          if (err instanceof ApiError && Array.isArray(err.details)) setProblems(err.details as Problem[]);
          setError(err);
        }
      }}
    >
      <h3>Publish a program</h3>
      <Field label="Program file (JSON)">
        {(id) => (
          <input
            id={id}
            type="file"
            accept=".json,application/json"
            onChange={async (e) => {
              const f = e.currentTarget.files?.[0];
              if (f) setText(await f.text());
            }}
          />
        )}
      </Field>
      <Field label="Program (JSON)">
        {(id) => <textarea id={id} rows={8} class="mono" value={text} onInput={(e) => setText(inputValue(e))} />}
      </Field>
      <Field label="Run it in">
        {(id) => (
          <select id={id} value={environment} onChange={(e) => setEnvironment(inputValue(e))}>
            {project.environments.map((env) => (
              <option key={env.id} value={env.alias}>
                {env.alias}
              </option>
            ))}
          </select>
        )}
      </Field>
      {problems?.length ? (
        <ul class="problems" aria-label="Program problems">
          {problems.map((p, i) => (
            <li key={i} class={p.severity}>
              <code>{p.path || '(program)'}</code> {p.severity}: {p.message}
            </li>
          ))}
        </ul>
      ) : null}
      <ErrorNote error={error} />
      {message ? <p role="status">{message}</p> : null}
      <button class="primary" type="submit">
        Validate and publish
      </button>
    </form>
  );
}

interface ChatEntry {
  key: string;
  who: 'user' | 'agent' | 'trace';
  text: string;
  trace?: Record<string, unknown>;
  buttons?: { name: string; request: Record<string, unknown> }[];
}

function Playground() {
  const { project, can } = useConsole();
  const [environment, setEnvironment] = useState('development');
  const [userID] = useState(() => `console-${Math.random().toString(36).slice(2, 10)}`);
  const [entries, setEntries] = useState<ChatEntry[]>([]);
  const [text, setText] = useState('');
  const [running, setRunning] = useState(false);
  const [everyTrace, setEveryTrace] = useState(false);
  const [transcriptID, setTranscriptID] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const counter = useRef(0);
  const log = useRef<HTMLOListElement>(null);

  const send = (action: Record<string, unknown>, label: string) => {
    setError(null);
    setRunning(true);
    setEntries((e) => [...e, { key: `u${++counter.current}`, who: 'user', text: label }]);
    subscribe<{ interact: { event: string; trace: Record<string, unknown> | null; outcome: string | null } }>(
      `subscription Chat($projectID: ID!, $userID: String!, $environment: String!, $request: InteractRequestInput!) {
        interact(projectID: $projectID, userID: $userID, environment: $environment, request: $request) { event trace outcome turnID }
      }`,
      { projectID: project.id, userID, environment, request: { action } },
      {
        next: ({ interact: ev }) => {
          if (ev.event === 'trace' && ev.trace) {
            const t = ev.trace;
            const payload = (t.payload ?? {}) as Record<string, unknown>;
            const key = `t${++counter.current}`;
            if (t.type === 'text' || t.type === 'speak')
              setEntries((e) => [...e, { key, who: 'agent', text: String(payload.message ?? ''), trace: t }]);
            else if (t.type === 'choice')
              setEntries((e) => [
                ...e,
                { key, who: 'agent', text: '', trace: t, buttons: (payload.buttons as ChatEntry['buttons']) ?? [] },
              ]);
            else setEntries((e) => [...e, { key, who: 'trace', text: String(t.type), trace: t }]);
          }
          if (ev.event === 'end' && ev.outcome !== 'completed')
            setEntries((e) => [...e, { key: `o${++counter.current}`, who: 'trace', text: `turn ${ev.outcome}` }]);
        },
        error: (err) => {
          setError(err);
          setRunning(false);
        },
        complete: async () => {
          setRunning(false);
          log.current?.lastElementChild?.scrollIntoView({ block: 'nearest' });
          if (!can('transcripts:read')) return;
          try {
            const found = await gql<{ transcripts: { edges: { node: { id: string } }[] } }>(
              'query ChatTranscript($p: ID!, $u: String!) { transcripts(projectID: $p, criteria: {userID: $u}, first: 1) { edges { node { id } } } }',
              { p: project.id, u: userID },
            );
            setTranscriptID(found.transcripts.edges[0]?.node.id ?? null);
          } catch {
            // The link is a convenience; the conversation itself worked.
          }
        },
      },
    );
  };

  if (!can('runtime:interact')) return null;
  return (
    <Section title="Chat playground">
      <div class="toolbar">
        <Field label="Talk to">
          {(id) => (
            <select id={id} value={environment} onChange={(e) => setEnvironment(inputValue(e))}>
              {project.environments.map((env) => (
                <option key={env.id} value={env.alias}>
                  {env.alias}
                </option>
              ))}
            </select>
          )}
        </Field>
        <label class="inline">
          <input type="checkbox" checked={everyTrace} onChange={() => setEveryTrace(!everyTrace)} /> Show every trace
        </label>
        <button type="button" disabled={running} onClick={() => send({ type: 'launch' }, '(start)')}>
          Start conversation
        </button>
      </div>
      <ol class="conversation" aria-label="Chat" aria-live="polite" ref={log}>
        {entries
          .filter((e) => e.who !== 'trace' || everyTrace)
          .map((e) => (
            <li key={e.key} class={`msg ${e.who}`}>
              <span class="who">{e.who === 'user' ? 'You' : e.who === 'agent' ? 'Agent' : 'Trace'}</span>
              {e.text ? <p>{e.text}</p> : null}
              {e.buttons?.length ? (
                <div class="row">
                  {e.buttons.map((b) => (
                    <button type="button" key={b.name} disabled={running} onClick={() => send(b.request, b.name)}>
                      {b.name}
                    </button>
                  ))}
                </div>
              ) : null}
              {everyTrace && e.trace ? <JsonBlock value={e.trace} label={`Trace ${String(e.trace.type)}`} /> : null}
            </li>
          ))}
      </ol>
      <form
        class="row"
        aria-label="Send a message"
        onSubmit={(e) => {
          e.preventDefault();
          if (!text.trim()) return;
          send({ type: 'text', payload: text }, text);
          setText('');
        }}
      >
        <Field label="Message">{(id) => <input id={id} value={text} onInput={(e) => setText(inputValue(e))} />}</Field>
        <button type="submit" class="primary" disabled={running}>
          Send
        </button>
      </form>
      <ErrorNote error={error} />
      {running ? <p role="status">The agent is answering…</p> : null}
      {transcriptID ? (
        <p>
          <a href={href('transcripts', transcriptID)}>Open the transcript of this conversation</a>
        </p>
      ) : null}
    </Section>
  );
}

function Environments() {
  const { project } = useConsole();
  const deployments = useAsync(
    () =>
      gql<{
        agentDeployments: {
          environment: { alias: string };
          version: { number: number; agent: { name: string } };
          updatedAt: string;
        }[];
      }>(
        'query Deployments($p: ID!) { agentDeployments(projectID: $p) { environment { alias } version { number agent { name } } updatedAt } }',
        { p: project.id },
      ),
    [project.id],
  );
  return (
    <Section title="Environments">
      <ErrorNote error={deployments.error} />
      <ul class="plain">
        {project.environments.map((env) => {
          const d = deployments.data?.agentDeployments.filter((x) => x.environment.alias === env.alias) ?? [];
          return (
            <li key={env.id}>
              <strong>{env.alias}</strong>:{' '}
              {d.length ? d.map((x) => `${x.version.agent.name} v${x.version.number}`).join(', ') : 'no agent'}
            </li>
          );
        })}
      </ul>
    </Section>
  );
}

export function AgentsPage() {
  const { can } = useConsole();
  return (
    <div class="page">
      <h1>Agents</h1>
      {can('admin') ? (
        <>
          <Environments />
          <AgentList />
        </>
      ) : (
        <p class="muted">Publishing and versions need a key with the admin scope.</p>
      )}
      <Playground />
    </div>
  );
}
