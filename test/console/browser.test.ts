/**
 * The console in headless Chromium against a real `parley serve` with demo data (`parley demo`)
 * and a few extras made through the public API: sign in, every page shows its data, a chart has
 * points, a counter moves when a conversation happens, the playground streams, an upload reaches
 * "indexed", nothing leaves the server's origin, no console errors. One screenshot per page lands
 * in tmp/screenshots/.
 */
import { execFile } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
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
  let pages: Server;
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
      // The web page the URL upload reads is served by this test on 127.0.0.1.
      KB_ALLOW_PRIVATE_URLS: 'true',
    });
    await waitUntilReady(server, '/readyz', 120_000);
    seeded = await seed(server, model, demoProjectID);
    pages = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(
        '<!doctype html><html><head><title>Gift cards</title></head><body><main><h1>Gift cards</h1>' +
          '<p>Gift cards never expire and can be used for any order in our shop.</p>' +
          '<p>A lost gift card can be replaced with its receipt.</p></main></body></html>',
      );
    });
    pages.listen(0, '127.0.0.1');
    await new Promise((r) => pages.once('listening', r));
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
    await new Promise((r) => (pages ? pages.close(r) : r(null)));
  });

  const shot = (name: string) => page.screenshot({ path: join(screenshots, `${name}.png`), fullPage: true });
  const nav = (name: string) => page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name });

  /** Visible controls without an accessible name (a label, aria-label(ledby), text or title). */
  const unnamedControls = () =>
    page.evaluate(() => {
      const out: string[] = [];
      for (const el of document.querySelectorAll<HTMLElement>('button, input, select, textarea, a[href], [tabindex]')) {
        if (el.getClientRects().length === 0 || (el as HTMLInputElement).type === 'hidden') continue;
        const input = el as HTMLInputElement;
        const named =
          el.getAttribute('aria-label')?.trim() ||
          el.getAttribute('aria-labelledby') ||
          (input.labels?.length ?? 0) > 0 ||
          el.title ||
          (el.tagName !== 'INPUT' && el.textContent?.trim());
        if (!named) out.push(el.outerHTML.slice(0, 160));
      }
      return out;
    });

  /**
   * Tab from the top of the page reaches every visible, enabled control of it (links, buttons,
   * fields): none is skipped or only reachable with a mouse.
   */
  const expectKeyboardReachesEverything = async (what: string) => {
    const total = await page.evaluate(() => {
      let n = 0;
      for (const el of document.querySelectorAll<HTMLElement>(
        'a[href], button, input, select, textarea, [tabindex]:not([tabindex="-1"])',
      )) {
        el.removeAttribute('data-reach');
        if (el.getClientRects().length === 0 || (el as HTMLButtonElement).disabled) continue;
        if ((el as HTMLInputElement).type === 'hidden' || el.closest('dialog:not([open])')) continue;
        // One stop per radio group: the keyboard moves within it with the arrow keys.
        if ((el as HTMLInputElement).type === 'radio' && !(el as HTMLInputElement).checked) continue;
        el.setAttribute('data-reach', String(n++));
      }
      (document.activeElement as HTMLElement | null)?.blur();
      const reached = new Set<string>();
      (window as unknown as { reached: Set<string> }).reached = reached;
      document.addEventListener('focusin', (e) => {
        const at = (e.target as HTMLElement | null)?.getAttribute?.('data-reach');
        if (at) reached.add(at);
      });
      return n;
    });
    for (let i = 0; i < total + 10; i++) await page.keyboard.press('Tab');
    const missed = await page.evaluate(() => {
      const seen = (window as unknown as { reached: Set<string> }).reached;
      return [...document.querySelectorAll<HTMLElement>('[data-reach]')]
        .filter((el) => !seen.has(el.getAttribute('data-reach')!))
        .map((el) => el.outerHTML.slice(0, 160));
    });
    expect(missed, `${what}: controls the keyboard does not reach`).toEqual([]);
  };

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
    // The README's picture (docs/images/console-overview.png): the first screen over the demo's week.
    await page.getByRole('combobox', { name: 'Range' }).selectOption('7d');
    await page.getByRole('figure', { name: /^Interactions chart: [78] points/ }).waitFor();
    await page.screenshot({ path: join(screenshots, 'readme-overview.png') });
    await page.getByRole('combobox', { name: 'Range' }).selectOption('30d');
    await page.getByRole('figure', { name: /^Interactions chart: 3\d points/ }).waitFor();
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

  it('sets and removes a property of the open transcript in place', async () => {
    const topic = async () =>
      (
        await gql(server, seeded.apiKey, 'query($id: ID!) { transcript(id: $id) { properties { name value } } }', {
          id: seeded.transcriptID,
        })
      ).transcript.properties.find((p: { name: string }) => p.name === 'topic')?.value;
    const form = page.getByRole('form', { name: 'Set a property' });
    await form.getByLabel('Property').selectOption({ label: 'topic (string)' });
    await form.getByLabel('Value').fill('refunds');
    await form.getByRole('button', { name: 'Set property' }).click();
    const properties = page.getByRole('region', { name: 'Properties' });
    await properties.getByText('refunds').waitFor();
    expect(await properties.getByText('order tracking').count()).toBe(0);
    expect(await topic()).toBe('refunds');
    await page.getByRole('button', { name: 'Remove property topic' }).click();
    await page.getByRole('button', { name: 'Remove property topic' }).waitFor({ state: 'detached' });
    expect(await properties.getByText('refunds').count()).toBe(0);
    expect(await topic()).toBeUndefined();
    await shot('transcript-properties');
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

  it('creates, edits and enables an evaluation', async () => {
    await page.getByRole('button', { name: 'New evaluation' }).click();
    const form = page.getByRole('form', { name: 'New evaluation' });
    await form.getByLabel('Name').fill('Polite');
    await form.getByLabel('Type').selectOption('number');
    await form.getByLabel('Prompt').fill('How polite was the agent?');
    await form.getByLabel('Minimum', { exact: true }).fill('1');
    await form.getByLabel('Minimum means').fill('rude');
    await form.getByLabel('Maximum', { exact: true }).fill('5');
    await form.getByLabel('Maximum means').fill('very polite');
    await form.getByRole('button', { name: 'Create evaluation' }).click();
    await page.getByRole('heading', { name: 'Polite' }).waitFor();
    const stored = async () =>
      (
        await gql(
          server,
          seeded.apiKey,
          'query($p: ID!) { transcriptEvaluations(projectID: $p) { name description prompt enabled maximumValue } }',
          { p: seeded.projectID },
        )
      ).transcriptEvaluations.find((e: { name: string }) => e.name === 'Polite');
    expect(await stored()).toMatchObject({ prompt: 'How polite was the agent?', maximumValue: 5 });

    await page.getByRole('button', { name: 'Edit Polite' }).click();
    const edit = page.getByRole('form', { name: 'Edit Polite' });
    await edit.getByLabel('Description').fill('Tone of the agent');
    await edit.getByLabel('Prompt').fill('How polite and friendly was the agent?');
    await edit.getByRole('button', { name: 'Save evaluation' }).click();
    await page.getByText('Tone of the agent').waitFor();
    expect(await stored()).toMatchObject({
      description: 'Tone of the agent',
      prompt: 'How polite and friendly was the agent?',
    });

    const enabled = page.getByRole('checkbox', { name: 'Enabled for Polite' });
    const before = await enabled.isChecked();
    await enabled.click();
    await expect.poll(async () => (await stored()).enabled).toBe(!before);
    await expect.poll(() => enabled.isChecked()).toBe(!before);
    // Back as it was: an enabled evaluation would judge every conversation the next tests end.
    await enabled.click();
    await expect.poll(async () => (await stored()).enabled).toBe(before);
    await shot('evaluation-edited');
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
    // The chunk's text is shown as it was cut: the heading's line break is not collapsed into a space.
    const firstChunk = await page.getByRole('region', { name: 'Chunks' }).locator('.chunk-text').first().innerText();
    expect(firstChunk).toMatch(/^# Returns\n+You can return any order within 30 days/);
    await shot('knowledge-document');
  });

  it('uploads a web page and a table, each reaching "indexed"', async () => {
    await nav('Knowledge base').click();
    const upload = page.getByRole('form', { name: 'Upload' });
    await upload.getByRole('radio', { name: 'A web page' }).check();
    const address = `http://127.0.0.1:${(pages.address() as AddressInfo).port}/gift-cards.html`;
    await upload.getByLabel('URL').fill(address);
    await upload.getByRole('button', { name: 'Upload' }).click();
    await page.getByRole('row', { name: /gift-cards\.html.*indexed|Gift cards.*indexed/ }).waitFor({ timeout: 30_000 });

    await upload.getByRole('radio', { name: 'A table' }).check();
    await upload.getByLabel('Table name').fill('Store hours');
    await upload.getByLabel('Searchable fields').fill('city, hours');
    await upload.getByLabel('Metadata fields').fill('city');
    await upload
      .getByLabel('Rows (JSON array)')
      .fill('[{"city": "Berlin", "hours": "9 to 18"}, {"city": "Lyon", "hours": "10 to 19"}]');
    await upload.getByLabel('Metadata (JSON object)').fill('{"team": "stores"}');
    await upload.getByRole('button', { name: 'Upload' }).click();
    await page.getByRole('row', { name: /Store hours.*indexed/ }).waitFor({ timeout: 30_000 });
    const docs = (
      await gql(
        server,
        seeded.apiKey,
        'query($p: ID) { knowledgeBaseDocuments(projectID: $p, limit: 100) { documents { data { name } status { type } chunkCount metadata } } }',
        { p: seeded.projectID },
      )
    ).knowledgeBaseDocuments.documents as {
      data: { name: string };
      status: { type: string };
      chunkCount: number;
      metadata: Record<string, unknown>;
    }[];
    const table = docs.find((d) => d.data.name === 'Store hours');
    expect(table).toMatchObject({ status: { type: 'SUCCESS' }, metadata: { team: 'stores' } });
    expect(table?.chunkCount).toBeGreaterThan(0);
    const web = docs.find((d) => /gift-cards|Gift cards/.test(d.data.name));
    expect(web?.status.type).toBe('SUCCESS');
    expect(web?.chunkCount).toBeGreaterThan(0);
    await shot('knowledge-uploads');
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

  it('rotates a key (the new secret shown once, the old one still working) and revokes one', async () => {
    const whoami = (key: string) => fetch(`${server.url}/v1/whoami`, { headers: { authorization: key } });
    await page.getByRole('button', { name: 'Create key' }).click();
    const first = page.getByLabel('New API key');
    const oldSecret = await first.inputValue();
    await page.getByRole('button', { name: 'I have copied it' }).click();
    await first.waitFor({ state: 'detached' });
    const oldId = oldSecret.split('.')[1]!;
    const oldRow = page.getByRole('row').filter({ hasText: oldId });
    await oldRow.getByRole('button', { name: /^Rotate / }).click();
    await page.getByRole('dialog', { name: 'Rotate this key?' }).getByRole('button', { name: 'Rotate' }).click();
    const secret = page.getByLabel('New API key');
    await secret.waitFor();
    const newSecret = await secret.inputValue();
    expect(newSecret).toMatch(/^ak\./);
    expect(newSecret).not.toBe(oldSecret);
    await page.getByRole('button', { name: 'I have copied it' }).click();
    await secret.waitFor({ state: 'detached' });
    // Shown once: nowhere on the page any more.
    expect(await page.content()).not.toContain(newSecret.split('.')[2]!);
    await oldRow.getByText(/^expires /).waitFor();
    expect((await whoami(newSecret)).status).toBe(200);
    expect((await whoami(oldSecret)).status).toBe(200); // the grace period (one day by default)

    const newRow = page.getByRole('row').filter({ hasText: newSecret.split('.')[1]! });
    await newRow.getByRole('button', { name: /^Revoke / }).click();
    await page.getByRole('dialog', { name: 'Revoke this key?' }).getByRole('button', { name: 'Revoke' }).click();
    await newRow.getByRole('cell', { name: 'revoked' }).waitFor();
    expect(await newRow.getByRole('button', { name: /^Revoke / }).count()).toBe(0);
    expect((await whoami(newSecret)).status).toBe(401);
    await shot('settings-rotated');
  });

  const everyPage = () =>
    [
      { name: 'overview', hash: '#/overview', ready: () => page.getByRole('figure', { name: /^Interactions chart/ }) },
      {
        name: 'transcripts',
        hash: '#/transcripts',
        ready: () => page.getByRole('heading', { name: /^\d+ transcripts?$/ }),
      },
      {
        name: 'transcript',
        hash: `#/transcripts/${seeded.transcriptID}`,
        ready: () => page.getByRole('list', { name: 'Conversation' }),
      },
      { name: 'evaluations', hash: '#/evaluations', ready: () => page.getByRole('heading', { name: 'Greeted' }) },
      { name: 'knowledge-base', hash: '#/knowledge', ready: () => page.getByRole('link', { name: 'Shipping times' }) },
      { name: 'agents', hash: '#/agents', ready: () => page.getByRole('heading', { name: 'Support bot' }) },
      { name: 'settings', hash: '#/settings', ready: () => page.getByRole('cell', { name: /^viewer / }) },
    ] as const;

  it('works at 390 px wide on every page: no sideways scrolling, every control named, the menu opens', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      for (const p of everyPage()) {
        await page.goto(`${server.url}/${p.hash}`);
        await p.ready().first().waitFor();
        expect(await page.evaluate(() => document.documentElement.scrollWidth), p.name).toBeLessThanOrEqual(390);
        expect(await unnamedControls(), p.name).toEqual([]);
        await shot(`${p.name}-390`);
      }
      await page.goto(`${server.url}/#/overview`);
      await page.getByRole('button', { name: 'Menu' }).click();
      await nav('Transcripts').waitFor();
      await shot('menu-390');
      await nav('Transcripts').click();
      await page.getByRole('heading', { name: /^\d+ transcripts?$/ }).waitFor();
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 });
    }
  });

  it('reaches every control of every page with the keyboard, at 1280 and at 390 px', { timeout: 240_000 }, async () => {
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: width === 390 ? 844 : 900 });
      try {
        for (const p of everyPage()) {
          await page.goto(`${server.url}/${p.hash}`);
          await p.ready().first().waitFor();
          await expectKeyboardReachesEverything(`${p.name} at ${width} px`);
        }
      } finally {
        await page.setViewportSize({ width: 1280, height: 900 });
      }
    }
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
