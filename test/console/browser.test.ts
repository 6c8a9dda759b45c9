/**
 * The console in headless Chromium against a real `parley serve` with demo data (`parley demo`)
 * and a few extras made through the public API: sign in, every page shows its data, a chart has
 * points, a counter moves when a conversation happens, the playground streams, an upload reaches
 * "indexed", nothing leaves the server's origin, no console errors. One screenshot per page lands
 * in tmp/screenshots/.
 */
import { execFile } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { scopes } from '../../src/auth/keys';
import { projectRoot } from '../../src/db/schema-source';
import type { ScratchDatabase } from '../../src/db/scratch';
import { describeWithChromium, launchChromium } from '../helpers/browser';
import { type FakeOpenAiServer, startFakeOpenAiServer } from '../helpers/fake-openai-server';
import { createTestDatabase, databaseLanes } from '../helpers/lanes';
import { type ServeProcess, startServeProcess, waitUntilReady } from '../helpers/serve-process';

const screenshots = join(projectRoot, 'tmp', 'screenshots');
const operatorToken = 'console-browser-test-operator-token';

interface Seeded {
  projectID: string;
  apiKey: string;
  readOnlyKey: string;
  transcriptID: string;
}

async function gql(server: ServeProcess, key: string, query: string, variables: Record<string, unknown> = {}) {
  const res = await fetch(`${server.url}/graphql`, {
    method: 'POST',
    headers: { authorization: key, 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  // biome-ignore lint/suspicious/noExplicitAny: seeding reads answers of every shape; each use picks what it needs.
  const body = (await res.json()) as { data?: Record<string, any>; errors?: unknown[] };
  if (body.errors) throw new Error(`${query.slice(0, 60)}: ${JSON.stringify(body.errors)}`);
  return body.data!;
}

/**
 * `parley demo` (the published support bot, a week of conversations with properties and evaluation
 * results, usage of every metric, three documents), then through the API: a key with every scope,
 * a read-only key, two conversations of our own, a property value, an evaluation judged by the fake
 * model, a table document, and a second workspace for the operator's pickers.
 */
async function runDemo(databaseUrl: string): Promise<string> {
  // Before the server starts: the command writes the database directly, in large transactions.
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [join(projectRoot, 'bin/parley.js'), 'demo', '--days', '7', '--seed', '1'],
    { env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' } },
  );
  return (JSON.parse(stdout) as { projectID: string }).projectID;
}

async function seed(server: ServeProcess, model: FakeOpenAiServer, projectID: string): Promise<Seeded> {
  const full = await gql(
    server,
    operatorToken,
    'mutation($p: ID!, $s: [String!]) { createApiKey(input: {projectID: $p, name: "console test", scopes: $s}) { apiKey } }',
    { p: projectID, s: [...scopes] },
  );
  const key = full.createApiKey.apiKey as string;
  const readOnly = await gql(
    server,
    operatorToken,
    'mutation($p: ID!) { createApiKey(input: {projectID: $p, name: "viewer", scopes: ["analytics:read", "transcripts:read"]}) { apiKey } }',
    { p: projectID },
  );
  // A second project, in its own workspace, for the operator's pickers.
  await gql(server, operatorToken, 'mutation { createProject(input: {name: "Sales bot"}) { project { id } } }');
  // Two conversations of our own with the demo's support bot.
  for (const user of ['alice', 'bob']) {
    await gql(
      server,
      key,
      'mutation($p: ID!, $u: String!, $r: InteractRequestInput!) { interact(projectID: $p, userID: $u, request: $r) { outcome } }',
      { p: projectID, u: user, r: { action: { type: 'launch' } } },
    );
  }
  const found = await gql(
    server,
    key,
    'query($p: ID!) { transcripts(projectID: $p, criteria: {userID: "alice"}, first: 1) { edges { node { id } } } }',
    { p: projectID },
  );
  const transcriptID = found.transcripts.edges[0].node.id as string;
  const property = await gql(
    server,
    key,
    'mutation($p: ID!) { createTranscriptProperty(input: {projectID: $p, name: "topic", type: string}) { id } }',
    { p: projectID },
  );
  await gql(
    server,
    key,
    'mutation($i: SetTranscriptPropertyValueInput!) { setTranscriptPropertyValue(input: $i) { value } }',
    { i: { propertyID: property.createTranscriptProperty.id, transcriptID, value: 'order tracking' } },
  );
  const evaluation = await gql(
    server,
    key,
    `mutation($p: ID!) { createTranscriptEvaluation(input: {projectID: $p, name: "Greeted", type: boolean,
      prompt: "Did the agent greet the user?", truePrompt: "It greeted", falsePrompt: "It did not"}) { id } }`,
    { p: projectID },
  );
  model.script({ type: 'chat', chunks: ['{"value": true, "reason": "The agent said hello first."}'] });
  await gql(
    server,
    key,
    'mutation($e: ID!, $p: ID!, $t: ID!) { runTranscriptEvaluation(evaluationID: $e, projectID: $p, transcriptID: $t) { status } }',
    { e: evaluation.createTranscriptEvaluation.id, p: projectID, t: transcriptID },
  );
  await gql(
    server,
    key,
    `mutation($p: ID) { uploadKnowledgeBaseTable(projectID: $p, wait: true, input: {name: "Shipping times",
      schema: {searchableFields: ["region", "answer"], metadataFields: ["region"]},
      items: [{region: "EU", answer: "Orders to the EU arrive in 3 to 5 days."},
              {region: "US", answer: "Orders to the US arrive in 5 to 8 days."}]}) { documentID } }`,
    { p: projectID },
  );
  return { projectID, apiKey: key, readOnlyKey: readOnly.createApiKey.apiKey, transcriptID };
}

describeWithChromium('console in a browser', (executablePath) => {
  let database: ScratchDatabase;
  let server: ServeProcess;
  let model: FakeOpenAiServer;
  let seeded: Seeded;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let page: Page;
  const problems: string[] = [];
  const foreign: string[] = [];

  beforeAll(async () => {
    mkdirSync(screenshots, { recursive: true });
    database = await createTestDatabase(databaseLanes()[0] ?? 'sqlite');
    // The language model (evaluation judge, answers) is the fake OpenAI-compatible server.
    const demoProjectID = await runDemo(database.url);
    model = await startFakeOpenAiServer();
    server = await startServeProcess({
      DATABASE_URL: database.url,
      ADMIN_TOKEN: operatorToken,
      LOG_LEVEL: 'warn',
      LLM_BASE_URL: model.baseUrl,
      LLM_DEFAULT_MODEL: 'fake-model',
      LLM_MAX_RETRIES: '0',
    });
    await waitUntilReady(server, '/readyz', 90_000); // up to 90 s: a cold `parley serve` is slow on a loaded machine
    seeded = await seed(server, model, demoProjectID);
    browser = await launchChromium(executablePath);
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
    page.setDefaultTimeout(10_000);
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page: ${e.message}`));
    page.on('request', (r) => {
      const url = r.url();
      if (!url.startsWith(server.url) && !url.startsWith('data:') && !url.startsWith('blob:')) foreign.push(url);
    });
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    if (server?.child.exitCode === null) {
      server.child.kill('SIGTERM');
      await server.exited;
    }
    await database?.drop();
    await model?.close();
  });

  const shot = (name: string) => page.screenshot({ path: join(screenshots, `${name}.png`), fullPage: true });
  const nav = (name: string) => page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name });

  it('signs in with an API key and shows the overview with charts, totals and top intents', async () => {
    await page.goto(`${server.url}/`);
    await page.getByRole('textbox', { name: 'API key' }).fill(seeded.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    // A chart with points and a non-zero total.
    const chart = page.getByRole('figure', { name: /^Interactions chart: \d+ points, total [1-9]/ });
    await chart.waitFor();
    const name = await chart.getAttribute('aria-label');
    expect(Number(/(\d+) points/.exec(name ?? '')?.[1])).toBeGreaterThanOrEqual(30);
    expect(await page.locator('.chart canvas').count()).toBeGreaterThanOrEqual(9);
    await page.getByRole('list', { name: 'Top intents' }).getByRole('listitem').first().waitFor();
    await page.getByRole('list', { name: 'Tokens by model' }).getByRole('listitem').first().waitFor();
    await page.getByRole('list', { name: 'Interactions by type' }).getByText('launch').waitFor();
    // The key is kept for the browser session only.
    expect(await page.evaluate(() => sessionStorage.getItem('parley.console.session'))).toContain(seeded.apiKey);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    await shot('overview');
  });

  it('moves the live counters when a conversation happens', async () => {
    const counter = page.getByTestId('total-interactions');
    const before = Number((await counter.textContent())?.replace(/\D/g, ''));
    // graphql-sse gives no "subscribed" signal: talk until the counter moves (each turn is a new interaction).
    let moved = false;
    for (let attempt = 0; attempt < 5 && !moved; attempt++) {
      await gql(
        server,
        seeded.apiKey,
        'mutation($p: ID!, $r: InteractRequestInput!) { interact(projectID: $p, userID: "carol", request: $r) { outcome } }',
        { p: seeded.projectID, r: { action: { type: 'launch' } } },
      );
      moved = await page
        .waitForFunction(
          (old) =>
            Number(document.querySelector('[data-testid="total-interactions"]')?.textContent?.replace(/\D/g, '')) > old,
          before,
          { timeout: 4000 },
        )
        .then(() => true)
        .catch(() => false);
    }
    expect(moved).toBe(true);
    await page
      .getByRole('status')
      .getByText(/Live · updated/)
      .waitFor();
  });

  it('searches transcripts and shows one as a conversation with its property and evaluation result', async () => {
    await nav('Transcripts').click();
    await page.getByRole('heading', { name: /^[1-9]\d* transcripts$/ }).waitFor();
    await page.getByLabel('User ID').fill('alice');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await page.getByRole('heading', { name: '1 transcript', exact: true }).waitFor();
    await shot('transcripts');
    await page.getByRole('table').getByRole('link').first().click();
    const conversation = page.getByRole('list', { name: 'Conversation' });
    await conversation.getByRole('listitem').first().waitFor();
    await page.getByText('order tracking').waitFor();
    await page.getByText('The agent said hello first.').waitFor();
    const shown = await conversation.getByRole('listitem').count();
    await page.getByRole('checkbox', { name: 'Show every trace' }).check();
    await expect.poll(() => conversation.getByRole('listitem').count()).toBeGreaterThan(shown);
    await shot('transcript');
  });

  it('grows the open transcript live as the conversation goes on', async () => {
    const conversation = page.getByRole('list', { name: 'Conversation' });
    const before = await conversation.getByRole('listitem').count();
    // alice's next turn continues her session, so its logs land in this transcript.
    let grew = false;
    for (let attempt = 0; attempt < 5 && !grew; attempt++) {
      await gql(
        server,
        seeded.apiKey,
        'mutation($p: ID!, $r: InteractRequestInput!) { interact(projectID: $p, userID: "alice", request: $r) { outcome } }',
        { p: seeded.projectID, r: { action: { type: 'text', payload: 'talk to a person' } } },
      );
      grew = await page
        .waitForFunction((old) => document.querySelectorAll('[aria-label="Conversation"] > li').length > old, before, {
          timeout: 4000,
        })
        .then(() => true)
        .catch(() => false);
    }
    expect(grew).toBe(true);
    await conversation.getByText('talk to a person').first().waitFor();
  });

  it('lists evaluations and shows results over time', async () => {
    await nav('Evaluations').click();
    await page.getByRole('heading', { name: 'Greeted' }).waitFor();
    // The demo's "Resolved" has finished results on each seeded day. (Greeted's one result does not
    // stay finished: the conversation it judged was handed off above, which ends its transcript and
    // runs the enabled evaluations again, against a model with nothing scripted.)
    await page.getByRole('button', { name: 'Results of Resolved' }).click();
    await page.getByRole('figure', { name: /^Resolved: % true per day chart: [1-9]\d* points/ }).waitFor();
    await shot('evaluations');
  });

  it('uploads a file that reaches "indexed", and queries with the playground', async () => {
    await nav('Knowledge base').click();
    await page.getByRole('link', { name: 'Shipping times' }).waitFor();
    await page.getByLabel('File', { exact: true }).setInputFiles({
      name: 'returns.md',
      mimeType: 'text/markdown',
      buffer: Buffer.from('# Returns\n\nYou can return any order within 30 days for a full refund.\n'),
    });
    await page.getByLabel('Metadata (JSON object)').fill('{"team": "support"}');
    await page.getByRole('button', { name: 'Upload' }).click();
    await page.getByRole('row', { name: /returns\.md.*indexed/ }).waitFor();
    await page.getByLabel('Question').fill('How long do I have to return an order?');
    await page.getByRole('button', { name: 'Ask' }).click();
    await page.getByRole('region', { name: 'Matched chunks' }).getByText(/score/).first().waitFor();
    await page
      .getByRole('region', { name: 'Answer' })
      .getByText(/tokens/)
      .waitFor();
    await shot('knowledge-base');
    await page.getByRole('link', { name: 'returns.md' }).first().click();
    await page.getByRole('heading', { name: 'Chunks' }).waitFor();
    await page.getByText('Chunk 1').waitFor();
    await shot('knowledge-document');
  });

  it('shows agents and versions, and the chat playground streams traces with a link to the transcript', async () => {
    await nav('Agents').click();
    await page.getByRole('heading', { name: 'Support bot' }).waitFor();
    await page.getByRole('button', { name: 'Start conversation' }).click();
    const chat = page.getByRole('list', { name: 'Chat' });
    await chat.locator('.msg.agent').first().waitFor();
    await page.getByRole('link', { name: 'Open the transcript of this conversation' }).waitFor();
    // A program with a mistake: the problem is shown at its path.
    await page.getByLabel('Program (JSON)').fill('{"name": "broken", "startFlow": "nowhere", "flows": []}');
    await page.getByRole('button', { name: 'Validate and publish' }).click();
    await page.getByRole('list', { name: 'Program problems' }).getByRole('listitem').first().waitFor();
    await shot('agents');
  });

  it('creates an API key whose secret is shown once', async () => {
    await nav('Settings').click();
    await page.getByLabel('Key name').fill('browser test key');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = page.getByLabel('New API key');
    await secret.waitFor();
    expect(await secret.inputValue()).toMatch(/^ak\./);
    await page.getByRole('button', { name: 'I have copied it' }).click();
    await secret.waitFor({ state: 'detached' });
    await page.getByRole('cell', { name: /^browser test key/ }).waitFor();
    await shot('settings');
  });

  it('works at 390 px wide: no sideways scrolling, the menu opens', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${server.url}/#/overview`);
    await page.getByRole('figure', { name: /^Interactions chart/ }).waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await page.getByRole('button', { name: 'Menu' }).click();
    await nav('Transcripts').waitFor();
    await shot('overview-390');
    await nav('Transcripts').click();
    await page.getByRole('heading', { name: /^\d+ transcripts?$/ }).waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await shot('transcripts-390');
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('is reachable from the keyboard: sign in with Tab and Enter, then move through the navigation', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('textbox', { name: 'API key' }).waitFor();
    await page.keyboard.press('Tab'); // the first radio ("An API key")
    await page.keyboard.press('Tab'); // the API key field
    expect(await page.evaluate(() => (document.activeElement as HTMLInputElement | null)?.type)).toBe('password');
    await page.keyboard.type(seeded.apiKey);
    await page.keyboard.press('Enter');
    await page.getByRole('navigation', { name: 'Console' }).waitFor();
    // Tab from the top reaches every navigation link, and Enter follows one.
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    const reached: string[] = [];
    for (let i = 0; i < 12 && !reached.includes('Settings'); i++) {
      await page.keyboard.press('Tab');
      reached.push(await page.evaluate(() => document.activeElement?.textContent?.trim() ?? ''));
    }
    expect(reached).toEqual(
      expect.arrayContaining(['Overview', 'Transcripts', 'Evaluations', 'Knowledge base', 'Agents', 'Settings']),
    );
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Settings', level: 1 }).waitFor();
  });

  it('hides what a key without the scopes may not use', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('textbox', { name: 'API key' }).fill(seeded.readOnlyKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await nav('Overview').click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    const links = await page.getByRole('navigation', { name: 'Console' }).getByRole('link').allTextContents();
    expect(links).toEqual(['Overview', 'Transcripts', 'Evaluations', 'Settings']);
    await nav('Settings').click();
    await page.getByText('Managing API keys needs a key with the admin scope.').waitFor();
    await nav('Transcripts').click();
    await page.getByRole('table').getByRole('link').first().click();
    await page.getByRole('list', { name: 'Conversation' }).waitFor();
    expect(await page.getByRole('button', { name: 'Delete transcript' }).count()).toBe(0);
    await shot('read-only-key');
  });

  it('signs in with the admin token and picks the project', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('radio', { name: 'The admin token' }).check();
    await page.getByRole('textbox', { name: 'Admin token' }).fill(operatorToken);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('operator', { exact: true }).waitFor();
    await nav('Settings').click();
    await page.getByRole('cell', { name: /^viewer / }).waitFor();
    // Two workspaces: the workspace picker switches to the other one and its project.
    const workspace = page.getByRole('combobox', { name: 'Workspace' });
    const current = await workspace.inputValue();
    const values = await workspace.locator('option').evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value));
    const other = values.find((w) => w !== current);
    expect(other).toBeTruthy();
    await workspace.selectOption(other!);
    await expect
      .poll(() => page.getByRole('combobox', { name: 'Project' }).locator('option:checked').textContent())
      .toBe('Sales bot');
    await page
      .getByRole('definition')
      .filter({ hasText: /^Sales bot/ })
      .waitFor();
    await shot('operator-settings');
  });

  it('made no request off the server and logged no errors', () => {
    expect(foreign).toEqual([]);
    expect(problems).toEqual([]);
  });
});
