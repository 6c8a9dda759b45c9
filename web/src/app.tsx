import { useEffect, useMemo, useState } from 'preact/hooks';
import { gql, loadSession, type Session, saveSession, setToken } from './api';
import { type ConsoleContext, Ctx, type ProjectInfo, type Viewer } from './context';
import { AgentsPage } from './pages/agents';
import { EvaluationsPage } from './pages/evaluations';
import { KnowledgePage } from './pages/knowledge';
import { OverviewPage } from './pages/overview';
import { SettingsPage } from './pages/settings';
import { TranscriptsPage } from './pages/transcripts';
import { href, useRoute } from './router';
import { ErrorNote, Field, inputValue, Loading, useAsync } from './ui';

interface PageDef {
  path: string;
  label: string;
  /** Any of these scopes opens the page. */
  scopes: string[];
}

const pages: PageDef[] = [
  { path: 'overview', label: 'Overview', scopes: ['analytics:read'] },
  { path: 'transcripts', label: 'Transcripts', scopes: ['transcripts:read'] },
  { path: 'evaluations', label: 'Evaluations', scopes: ['transcripts:read'] },
  { path: 'knowledge', label: 'Knowledge base', scopes: ['kb:read'] },
  { path: 'agents', label: 'Agents', scopes: ['admin', 'runtime:interact'] },
  { path: 'settings', label: 'Settings', scopes: [] },
];

const viewerQuery = `query ConsoleViewer {
  viewer { kind keyID projectID workspaceID scopes }
  projects { id name workspaceID environments { id alias } }
}`;

function SignIn({ onSignIn }: { onSignIn: (s: Session) => void }) {
  const [kind, setKind] = useState<'key' | 'operator'>('key');
  const [token, setTokenValue] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  return (
    <main class="signin">
      <h1>Parley console</h1>
      <form
        class="card"
        aria-label="Sign in"
        onSubmit={async (e) => {
          e.preventDefault();
          setBusy(true);
          setError(null);
          const value = token.trim();
          setToken(value);
          try {
            const data = await gql<{ viewer: Viewer }>('query SignIn { viewer { kind } }');
            if (data.viewer.kind !== 'key' && data.viewer.kind !== 'operator')
              throw new Error(kind === 'key' ? 'This API key is not valid.' : 'This admin token is not valid.');
            onSignIn({ kind: data.viewer.kind, token: value });
          } catch (err) {
            setToken('');
            setError(err);
          } finally {
            setBusy(false);
          }
        }}
      >
        <fieldset>
          <legend>Sign in with</legend>
          <label class="inline">
            <input type="radio" name="kind" checked={kind === 'key'} onChange={() => setKind('key')} /> An API key
          </label>
          <label class="inline">
            <input type="radio" name="kind" checked={kind === 'operator'} onChange={() => setKind('operator')} /> The
            admin token
          </label>
        </fieldset>
        <Field label={kind === 'key' ? 'API key' : 'Admin token'} hint="Kept in this browser tab until you sign out.">
          {(id) => (
            <input
              id={id}
              type="password"
              autocomplete="off"
              required
              value={token}
              onInput={(e) => setTokenValue(inputValue(e))}
            />
          )}
        </Field>
        <ErrorNote error={error} />
        <button class="primary" type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}

function ProjectPicker(props: { projects: ProjectInfo[]; projectID: string; onPick: (id: string) => void }) {
  const workspaces = [...new Set(props.projects.map((p) => p.workspaceID))];
  const current = props.projects.find((p) => p.id === props.projectID);
  const [workspace, setWorkspace] = useState(current?.workspaceID ?? workspaces[0] ?? '');
  const inWorkspace = props.projects.filter((p) => p.workspaceID === workspace);
  return (
    <div class="picker">
      {workspaces.length > 1 ? (
        <Field label="Workspace">
          {(id) => (
            <select
              id={id}
              value={workspace}
              onChange={(e) => {
                const ws = inputValue(e);
                setWorkspace(ws);
                const first = props.projects.find((p) => p.workspaceID === ws);
                if (first) props.onPick(first.id);
              }}
            >
              {workspaces.map((w) => (
                <option value={w} key={w}>
                  {/* The API has no workspace names: a workspace is shown by its projects. */}
                  {props.projects
                    .filter((p) => p.workspaceID === w)
                    .map((p) => p.name)
                    .join(', ')}{' '}
                  · {w.slice(-6)}
                </option>
              ))}
            </select>
          )}
        </Field>
      ) : null}
      <Field label="Project">
        {(id) => (
          <select id={id} value={props.projectID} onChange={(e) => props.onPick(inputValue(e))}>
            {inWorkspace.map((p) => (
              <option value={p.id} key={p.id}>
                {p.name}
              </option>
            ))}
          </select>
        )}
      </Field>
    </div>
  );
}

function Shell({ session, onSignOut }: { session: Session; onSignOut: () => void }) {
  const route = useRoute();
  const { data, error, loading, reload } = useAsync(
    () => gql<{ viewer: Viewer; projects: ProjectInfo[] }>(viewerQuery),
    [session.token],
  );
  const [projectID, setProjectID] = useState<string>(() => sessionStorage.getItem('parley.console.project') ?? '');
  const [menuOpen, setMenuOpen] = useState(false);

  const project = data?.projects.find((p) => p.id === projectID) ?? data?.projects[0] ?? null;
  useEffect(() => {
    if (project) sessionStorage.setItem('parley.console.project', project.id);
  }, [project?.id]);

  const ctx = useMemo<ConsoleContext | null>(() => {
    if (!data || !project) return null;
    const scopes = new Set(data.viewer.scopes);
    const operator = data.viewer.kind === 'operator';
    return { viewer: data.viewer, project, can: (s) => operator || scopes.has(s), reloadProject: reload };
  }, [data, project]);

  if (loading && !data) return <Loading label="Signing in…" />;
  if (error || !data)
    return (
      <main class="signin">
        <ErrorNote error={error} />
        <button type="button" onClick={onSignOut}>
          Sign out
        </button>
      </main>
    );
  if (!ctx)
    return (
      <main class="signin">
        <p>
          This sign-in reaches no project yet. Create one with <code>npx parley project create</code>.
        </p>
        <button type="button" onClick={onSignOut}>
          Sign out
        </button>
      </main>
    );

  const visible = pages.filter((p) => p.scopes.length === 0 || p.scopes.some((s) => ctx.can(s)));
  const fallback = visible[0]?.path ?? 'settings';
  const current = visible.some((p) => p.path === route[0]) ? route[0]! : fallback;
  const rest = visible.some((p) => p.path === route[0]) ? route.slice(1) : [];

  return (
    <Ctx.Provider value={ctx}>
      <div class="layout">
        <header class="topbar">
          <a class="brand" href={href(fallback)}>
            Parley
          </a>
          <button
            type="button"
            class="menu-toggle"
            aria-expanded={menuOpen}
            aria-controls="main-nav"
            onClick={() => setMenuOpen(!menuOpen)}
          >
            Menu
          </button>
          <nav id="main-nav" aria-label="Console" class={menuOpen ? 'open' : ''}>
            <ul>
              {visible.map((p) => (
                <li key={p.path}>
                  <a
                    href={href(p.path)}
                    aria-current={p.path === current ? 'page' : undefined}
                    onClick={() => setMenuOpen(false)}
                  >
                    {p.label}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
          <div class="session">
            {data.projects.length > 1 ? (
              <ProjectPicker projects={data.projects} projectID={ctx.project.id} onPick={setProjectID} />
            ) : (
              <span class="muted">{ctx.project.name}</span>
            )}
            <span class="badge">{data.viewer.kind === 'operator' ? 'operator' : 'API key'}</span>
            <button type="button" onClick={onSignOut}>
              Sign out
            </button>
          </div>
        </header>
        <main class="content" key={ctx.project.id}>
          {current === 'overview' ? <OverviewPage /> : null}
          {current === 'transcripts' ? <TranscriptsPage path={rest} /> : null}
          {current === 'evaluations' ? <EvaluationsPage /> : null}
          {current === 'knowledge' ? <KnowledgePage path={rest} /> : null}
          {current === 'agents' ? <AgentsPage /> : null}
          {current === 'settings' ? <SettingsPage /> : null}
        </main>
      </div>
    </Ctx.Provider>
  );
}

export function App() {
  const [session, setSession] = useState<Session | null>(() => {
    const s = loadSession();
    if (s) setToken(s.token);
    return s;
  });
  if (!session)
    return (
      <SignIn
        onSignIn={(s) => {
          saveSession(s);
          setSession(s);
        }}
      />
    );
  return (
    <Shell
      session={session}
      onSignOut={() => {
        saveSession(null);
        sessionStorage.removeItem('parley.console.project');
        setToken('');
        setSession(null);
      }}
    />
  );
}
