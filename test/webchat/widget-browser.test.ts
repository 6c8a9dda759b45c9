/**
 * The official web chat widget (@voiceflow/react-chat 1.65.2, from Parley's own node_modules) in
 * headless Chromium, embedded by examples/web-chat/index.html on another origin, against a real
 * `parley serve`: the page loads the widget from Parley, the chat opens with the agent's first
 * message and its buttons, a click advances the conversation, a thumbs-down is recorded with its
 * turn, and the one transcript holds the whole exchange and the browser's description. Nothing is
 * requested from anywhere but the page's origin and Parley. A screenshot lands in tmp/screenshots/.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { projectRoot } from '../../src/db/schema-source';
import type { ScratchDatabase } from '../../src/db/scratch';
import { describeWithChromium, launchChromium } from '../helpers/browser';
import { createTestDatabase, databaseLanes } from '../helpers/lanes';
import { type ServeProcess, startServeProcess, waitUntilReady } from '../helpers/serve-process';

const screenshots = join(projectRoot, 'tmp', 'screenshots');
const operatorToken = 'webchat-browser-test-operator-token';

const program = {
  name: 'Shop helper',
  startFlow: 'main',
  flows: [
    {
      id: 'main',
      start: 'hello',
      steps: [
        { id: 'hello', type: 'message', message: 'Hi! How can I help?', next: 'menu' },
        {
          id: 'menu',
          type: 'choice',
          buttons: [
            { label: 'Track order', next: 'track' },
            { label: 'Goodbye', next: 'bye' },
          ],
        },
        { id: 'track', type: 'message', message: 'Your order is on its way.', next: 'menu' },
        { id: 'bye', type: 'message', message: 'Bye!' },
      ],
    },
  ],
};

async function gql(server: ServeProcess, query: string, variables: Record<string, unknown> = {}) {
  const res = await fetch(`${server.url}/graphql`, {
    method: 'POST',
    headers: { authorization: operatorToken, 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  // biome-ignore lint/suspicious/noExplicitAny: each caller reads the part of the answer it asked for.
  const body = (await res.json()) as { data?: Record<string, any>; errors?: unknown[] };
  if (body.errors) throw new Error(`${query.slice(0, 60)}: ${JSON.stringify(body.errors)}`);
  return body.data!;
}

/** The example page, pointed at this Parley and project, served from its own origin. */
async function startSite(parleyUrl: string, projectID: string): Promise<{ server: Server; origin: string }> {
  const page = readFileSync(join(projectRoot, 'examples/web-chat/index.html'), 'utf8')
    .replaceAll('http://localhost:3000', parleyUrl)
    .replace('YOUR_PROJECT_ID', projectID);
  const server = createServer((req, res) => {
    if (req.url === '/' || req.url === '/index.html') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(page);
    } else if (req.url === '/favicon.ico') {
      res.writeHead(204);
      res.end();
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  // "localhost" and Parley's "127.0.0.1" are different origins: the widget's requests are cross-origin.
  return { server, origin: `http://localhost:${(server.address() as AddressInfo).port}` };
}

describeWithChromium('web chat widget in a browser', (executablePath) => {
  let database: ScratchDatabase;
  let server: ServeProcess;
  let site: { server: Server; origin: string };
  let projectID: string;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let page: Page;
  const problems: string[] = [];
  const foreign: string[] = [];
  const widgetRequests: string[] = [];

  beforeAll(async () => {
    mkdirSync(screenshots, { recursive: true });
    database = await createTestDatabase(databaseLanes()[0] ?? 'sqlite');
    server = await startServeProcess({ DATABASE_URL: database.url, ADMIN_TOKEN: operatorToken, LOG_LEVEL: 'warn' });
    // Up to 90 s: on a loaded machine a cold `parley serve` (tsx compiling its sources) is slow to start.
    await waitUntilReady(server, '/readyz', 90_000);
    const created = await gql(server, 'mutation { createProject(input: {name: "Shop"}) { project { id } } }');
    projectID = created.createProject.project.id;
    await gql(server, 'mutation($input: PublishAgentInput!) { publishAgent(input: $input) { version { id } } }', {
      input: { projectID, program, environment: 'production' },
    });
    site = await startSite(server.url, projectID);
    await gql(
      server,
      `mutation($p: ID!, $input: WebChatSettingsInput!) {
        updateWebChatSettings(projectID: $p, environment: "production", input: $input) { enabled }
      }`,
      { p: projectID, input: { enabled: true, allowedOrigins: [site.origin], title: 'Shop help', feedback: true } },
    );
    browser = await launchChromium(executablePath);
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
    page.setDefaultTimeout(15_000);
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page: ${e.message}`));
    page.on('response', (r) => {
      if (r.status() >= 400) problems.push(`${r.status()} ${r.request().method()} ${r.url()}`);
    });
    page.on('request', (r) => {
      const url = r.url();
      if (url.startsWith(server.url)) widgetRequests.push(`${r.method()} ${new URL(url).pathname}`);
      else if (!url.startsWith(site.origin) && !url.startsWith('data:') && !url.startsWith('blob:')) foreign.push(url);
    });
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => (site?.server ? site.server.close(resolve) : resolve(undefined)));
    if (server?.child.exitCode === null) {
      server.child.kill('SIGTERM');
      await server.exited;
    }
    await database?.drop();
  });

  it('opens the chat, shows the first message and buttons, advances on a click, records a thumbs-down and the transcript', async () => {
    await page.goto(`${site.origin}/`);
    // The widget renders in an open shadow root; Playwright's locators pierce it.
    await page.locator('.vfrc-launcher').click();
    await page.getByText('Hi! How can I help?').waitFor();
    await page.getByRole('button', { name: 'Track order' }).waitFor();
    await page.getByRole('button', { name: 'Goodbye' }).waitFor();
    await page.getByText('Shop help').first().waitFor();

    await page.getByRole('button', { name: 'Track order' }).click();
    await page.getByText('Your order is on its way.').waitFor();
    // The second answer's buttons (the first answer's went away with the click) and its feedback row.
    await page.getByRole('button', { name: 'Goodbye' }).waitFor();
    const feedback = page.locator('.vfrc-feedback').nth(1);
    await feedback.waitFor();
    const sent = page.waitForResponse((r) => r.url().includes(`/feedback/${projectID}/user/`) && r.status() === 200);
    await feedback.locator('.vfrc-feedback--button').nth(1).click();
    await sent;
    // The clicked thumb turns active (filled with the primary colour) once the widget has sent it.
    await page.screenshot({ path: join(screenshots, 'web-chat-widget.png') });

    const data = await gql(
      server,
      `query($p: ID!) { transcripts(projectID: $p) { edges { node {
        userID device browser os history { id } feedback { turnID rating }
        logs { type data }
      } } } }`,
      { p: projectID },
    );
    const transcripts = data.transcripts.edges.map((e: { node: unknown }) => e.node);
    expect(transcripts).toHaveLength(1);
    const [transcript] = transcripts;
    expect(transcript.device).toBe('desktop');
    expect(transcript.browser).toBe('Chrome');
    expect(transcript.os).toBe('Linux');
    expect(transcript.history).toHaveLength(2);
    expect(transcript.feedback).toEqual([{ turnID: transcript.history[1].id, rating: 'negative' }]);
    const texts = transcript.logs
      .filter((l: { type: string; data: { type?: string } }) => l.type === 'trace' && l.data.type === 'text')
      .map((l: { data: { payload: { message: string } } }) => l.data.payload.message);
    expect(texts).toEqual(['Hi! How can I help?', 'Your order is on its way.']);
    const actions = transcript.logs.filter((l: { type: string }) => l.type === 'action');
    expect(actions[0].data.type).toBe('launch');

    expect(widgetRequests).toEqual(
      expect.arrayContaining([
        'GET /web-chat/bundle.mjs',
        `GET /public/${projectID}/publishing`,
        `POST /public/${projectID}/state/user/${transcript.userID}/interact`,
        `POST /public/${projectID}/transcripts`,
        `POST /feedback/${projectID}/user/${transcript.userID}`,
      ]),
    );
    expect(foreign).toEqual([]);
    expect(problems).toEqual([]);
  }, 120_000);
});
