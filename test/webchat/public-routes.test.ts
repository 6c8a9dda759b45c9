import { expect, it } from 'vitest';
import { type TestApp, type TestProject, useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { publish } from '../helpers/runtime';

/**
 * The web chat widget's public routes over real HTTP: off until turned on, per project and
 * environment, CORS for exactly the allowed origins, `{trace}` answers, rate limits per user ID and
 * per client address, body limits, and no way to reach another user's state or project data.
 */

const site = 'https://shop.example';
const other = 'https://evil.example';

const program = {
  name: 'Helper',
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

const settingsMutation = `mutation Set($projectID: ID!, $environment: String, $input: WebChatSettingsInput!) {
  updateWebChatSettings(projectID: $projectID, environment: $environment, input: $input) {
    projectID environment enabled allowedOrigins title description primaryColor avatarImage launcherImage
    position persistence feedback
  }
}`;

async function setSettings(app: TestApp, project: TestProject, input: Record<string, unknown>, environment?: string) {
  const res = await app.gql(settingsMutation, { projectID: project.projectID, environment, input }, app.operatorToken);
  expect(res.body.errors, JSON.stringify(res.body.errors)).toBeUndefined();
  return res.body.data.updateWebChatSettings;
}

const interactPath = (projectID: string, userID: string) => `/public/${projectID}/state/user/${userID}/interact`;
const launch = { action: { type: 'launch' }, config: { tts: false, stripSSML: true } };

describeEachDatabase('web chat settings and public routes', (provider) => {
  const t = useTestApp(provider, { env: { RATE_LIMIT_RUNTIME: '1000/60', RATE_LIMIT_DEFAULT: '1000/60' } });

  async function onProject() {
    const project = await t.app.createProject({ scopes: ['admin', 'runtime:interact'] });
    await publish(t.app, project.projectID, program);
    return project;
  }

  it('manages settings through GraphQL: defaults are off, updates change only what they name, bad input is refused', async () => {
    const project = await t.app.createProject({ scopes: ['admin'] });
    const read = await t.app.gql(
      'query($p: ID!) { webChatSettings(projectID: $p) { enabled allowedOrigins title position persistence feedback updatedAt } }',
      { p: project.projectID },
      project.apiKey,
    );
    expect(read.body.data.webChatSettings).toEqual({
      enabled: false,
      allowedOrigins: [],
      title: 'Assistant',
      position: 'right',
      persistence: 'localStorage',
      feedback: true,
      updatedAt: null,
    });
    const set = await setSettings(t.app, project, { enabled: true, allowedOrigins: [site], title: 'Shop help' });
    expect(set).toMatchObject({
      enabled: true,
      allowedOrigins: [site],
      title: 'Shop help',
      environment: 'development',
    });
    const again = await setSettings(t.app, project, { position: 'left', avatarImage: 'https://img.example/a.png' });
    expect(again).toMatchObject({
      enabled: true,
      title: 'Shop help',
      position: 'left',
      avatarImage: 'https://img.example/a.png',
    });

    const bad = await t.app.gql(
      settingsMutation,
      { projectID: project.projectID, input: { allowedOrigins: ['https://shop.example/path'], primaryColor: 'blue' } },
      t.app.operatorToken,
    );
    expect(bad.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_FAILED');
    const unchanged = await setSettings(t.app, project, {});
    expect(unchanged.allowedOrigins).toEqual([site]);

    // A key without the admin scope cannot change them; another tenant's key sees no such project.
    const reader = await t.app.createProject({ scopes: ['runtime:interact'] });
    const denied = await t.app.gql(
      settingsMutation,
      { projectID: reader.projectID, input: { enabled: true } },
      reader.apiKey,
    );
    expect(denied.body.errors?.[0]?.extensions?.code).toBe('INSUFFICIENT_SCOPE');
    const foreign = await t.app.gql(
      settingsMutation,
      { projectID: project.projectID, input: { enabled: true } },
      (await t.app.createProject({ scopes: ['admin'] })).apiKey,
    );
    expect(foreign.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
  });

  it('refuses everything while web chat is off, for unknown projects and for environments not turned on', async () => {
    const project = await onProject();
    const headers = { origin: site };
    const off = await t.app.http('GET', `/public/${project.projectID}/publishing`, { headers });
    expect(off.status).toBe(404);
    expect(off.body.errorCode).toBe('NOT_FOUND');
    expect(off.headers.get('access-control-allow-origin')).toBeNull();
    const offTurn = await t.app.http('POST', interactPath(project.projectID, 'u1'), { headers, body: launch });
    expect(offTurn.status).toBe(404);

    await setSettings(t.app, project, { enabled: true, allowedOrigins: [site] });
    const production = await t.app.http('GET', `/public/${project.projectID}/publishing`, {
      headers: { ...headers, versionID: 'production' },
    });
    expect(production.status).toBe(404);
    const unknown = await t.app.http('GET', '/public/nope/publishing', { headers });
    expect(unknown.status).toBe(404);
    expect(unknown.body.message).toBe('Web chat is not enabled for project "nope".');

    // Turned off again: refused again.
    await setSettings(t.app, project, { enabled: false });
    expect((await t.app.http('GET', `/public/${project.projectID}/publishing`, { headers })).status).toBe(404);
  });

  it('answers CORS only for the allowed origins, with the headers the widget sends', async () => {
    const project = await onProject();
    await setSettings(t.app, project, { enabled: true, allowedOrigins: [site] });
    const pre = await t.app.http('OPTIONS', interactPath(project.projectID, 'u1'), {
      headers: {
        origin: site,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type,versionid',
      },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe(site);
    expect(pre.headers.get('access-control-allow-methods')).toBe('GET, POST');
    expect(pre.headers.get('access-control-allow-headers')).toBe('content-type, versionid');

    const preOther = await t.app.http('OPTIONS', `/public/${project.projectID}/publishing`, {
      headers: {
        origin: other,
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'content-type',
      },
    });
    expect(preOther.status).toBe(403);
    expect(preOther.headers.get('access-control-allow-origin')).toBeNull();

    const preExtra = await t.app.http('OPTIONS', `/public/${project.projectID}/publishing`, {
      headers: {
        origin: site,
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'authorization',
      },
    });
    expect(preExtra.status).toBe(403);

    const fromOther = await t.app.http('POST', interactPath(project.projectID, 'u1'), {
      headers: { origin: other },
      body: launch,
    });
    expect(fromOther.status).toBe(403);
    expect(fromOther.body).toMatchObject({
      errorCode: 'FORBIDDEN',
      message: 'Origin "https://evil.example" may not use this web chat.',
    });
    const noOrigin = await t.app.http('GET', `/public/${project.projectID}/publishing`);
    expect(noOrigin.status).toBe(403);
  });

  it('serves publishing in the widget shape with images Parley serves itself', async () => {
    const project = await onProject();
    await setSettings(t.app, project, {
      enabled: true,
      allowedOrigins: [site],
      title: 'Shop help',
      description: 'We answer',
      primaryColor: '#112233',
      feedback: false,
    });
    const res = await t.app.http('GET', `/public/${project.projectID}/publishing`, {
      headers: { origin: site, 'content-type': 'application/json' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe(site);
    const host = new URL(t.app.url).host;
    expect(res.body).toEqual({
      title: 'Shop help',
      description: 'We answer',
      color: '#112233',
      image: `http://${host}/webchat/assets/avatar.svg`,
      avatar: `http://${host}/webchat/assets/avatar.svg`,
      launcher: `http://${host}/webchat/assets/launcher.svg`,
      position: 'right',
      persistence: 'localStorage',
      feedback: false,
      watermark: false,
    });
    const image = await fetch(res.body.avatar);
    expect(image.status).toBe(200);
    expect(image.headers.get('content-type')).toContain('image/svg+xml');
    expect(await image.text()).toContain('<svg');
  });

  it('runs turns as {trace}, ends with an end trace, keeps users apart, and refuses bad input', async () => {
    const project = await onProject();
    await setSettings(t.app, project, { enabled: true, allowedOrigins: [site] });
    const headers = { origin: site };
    const first = await t.app.http('POST', interactPath(project.projectID, 'alice'), { headers, body: launch });
    expect(first.status, first.text).toBe(200);
    expect(Array.isArray(first.body)).toBe(false);
    const types = (first.body.trace as { type: string }[]).map((tr) => tr.type);
    expect(types).toContain('text');
    const choice = first.body.trace.find((tr: { type: string }) => tr.type === 'choice');
    expect(choice.payload.buttons.map((b: { name: string }) => b.name)).toEqual(['Track order', 'Goodbye']);

    // Bob's turn does not see Alice's conversation: he starts at the beginning.
    const bob = await t.app.http('POST', interactPath(project.projectID, 'bob'), {
      headers,
      body: { action: choice.payload.buttons[0].request },
    });
    expect(bob.status).toBe(200);
    expect(bob.body.trace.map((tr: { type: string }) => tr.type)).not.toContain('end');

    const bye = await t.app.http('POST', interactPath(project.projectID, 'alice'), {
      headers,
      body: { action: choice.payload.buttons[1].request },
    });
    expect(bye.status).toBe(200);
    const byeTypes = bye.body.trace.map((tr: { type: string }) => tr.type);
    expect(byeTypes.at(-1)).toBe('end');
    expect(bye.body.trace.find((tr: { type: string }) => tr.type === 'text').payload.message).toBe('Bye!');

    // No state, variables or other member is accepted: a client cannot plant or read a state.
    const planted = await t.app.http('POST', interactPath(project.projectID, 'alice'), {
      headers,
      body: { ...launch, state: { stack: [], storage: {}, variables: {} } },
    });
    expect(planted.status).toBe(400);
    expect(planted.body.errorCode).toBe('VALIDATION_FAILED');
    const badAction = await t.app.http('POST', interactPath(project.projectID, 'alice'), {
      headers,
      body: { action: { type: 'text' } },
    });
    expect(badAction.status).toBe(400);
    const tooBig = await t.app.http('POST', interactPath(project.projectID, 'alice'), {
      headers,
      body: { action: { type: 'text', payload: 'x'.repeat(20_000) } },
    });
    expect(tooBig.status).toBe(413);
  });

  const transcriptQuery = `query($p: ID!) { transcripts(projectID: $p) { edges { node {
    id userID environmentID device browser os userName userImage history { id } feedback { turnID rating }
  } } } }`;
  async function transcriptsOf(project: TestProject) {
    const res = await t.app.gql(transcriptQuery, { p: project.projectID }, t.app.operatorToken);
    expect(res.body.errors, JSON.stringify(res.body.errors)).toBeUndefined();
    return res.body.data.transcripts.edges.map((e: { node: unknown }) => e.node) as {
      id: string;
      userID: string;
      environmentID: string;
      device: string | null;
      browser: string | null;
      os: string | null;
      userName: string | null;
      userImage: string | null;
      history: { id: string }[];
      feedback: { turnID: string; rating: string }[];
    }[];
  }
  const feedbackPath = (projectID: string, userID: string) => `/feedback/${projectID}/user/${userID}`;
  const transcriptsPath = (projectID: string) => `/public/${projectID}/transcripts`;

  it('records the widget client on the transcript the runtime keeps, and feedback with the turn it rates', async () => {
    const project = await onProject();
    await publish(t.app, project.projectID, program, 'production');
    await setSettings(t.app, project, { enabled: true, allowedOrigins: [site] }, 'production');
    // As the widget sends them: interact and feedback name the environment, the transcripts POST does not.
    const headers = { origin: site, versionID: 'production' };
    const first = await t.app.http('POST', interactPath(project.projectID, 'erin'), { headers, body: launch });
    expect(first.status, first.text).toBe(200);
    const choice = first.body.trace.find((tr: { type: string }) => tr.type === 'choice');
    const client = await t.app.http('POST', transcriptsPath(project.projectID), {
      headers: { origin: site },
      body: { os: 'Linux', browser: 'Chrome', device: 'desktop', user: { name: 'Erin' }, sessionID: 'erin' },
    });
    expect(client.status, client.text).toBe(200);
    expect(client.headers.get('access-control-allow-origin')).toBe(site);
    expect(client.body).toEqual({ sessionID: 'erin', os: 'Linux', browser: 'Chrome', device: 'desktop' });
    const second = await t.app.http('POST', interactPath(project.projectID, 'erin'), {
      headers,
      body: { action: choice.payload.buttons[0].request },
    });
    expect(second.status).toBe(200);

    const down = await t.app.http('POST', feedbackPath(project.projectID, 'erin'), {
      headers,
      body: {
        name: 'Thumbs down',
        text: ['Your order is on its way.'],
        lastUserTurn: { id: 'c1', type: 'user', message: 'Track order', timestamp: Date.now() },
      },
    });
    expect(down.status, down.text).toBe(200);
    const up = await t.app.http('POST', feedbackPath(project.projectID, 'erin'), {
      headers,
      body: { name: 'Thumbs up', text: ['Hi! How can I help?'], lastUserTurn: null },
    });
    expect(up.status, up.text).toBe(200);

    // One transcript: the one the runtime keeps for Erin's session, now with her client and ratings.
    const [transcript, ...more] = await transcriptsOf(project);
    expect(more).toEqual([]);
    expect(transcript).toMatchObject({
      userID: 'erin',
      device: 'desktop',
      browser: 'Chrome',
      os: 'Linux',
      userName: 'Erin',
      userImage: null,
    });
    expect(transcript!.history).toHaveLength(2);
    expect(transcript!.feedback).toEqual([
      { turnID: transcript!.history[1]!.id, rating: 'negative' },
      { turnID: transcript!.history[0]!.id, rating: 'positive' },
    ]);
    expect(down.body).toEqual({ rating: 'negative', turnID: transcript!.history[1]!.id });

    const counts = async (environment?: string) => {
      const res = await t.app.gql(
        'query($p: ID!, $e: String) { webChatFeedback(projectID: $p, environment: $e) { positive negative total } }',
        { p: project.projectID, e: environment },
        t.app.operatorToken,
      );
      expect(res.body.errors, JSON.stringify(res.body.errors)).toBeUndefined();
      return res.body.data.webChatFeedback;
    };
    expect(await counts()).toEqual({ positive: 1, negative: 1, total: 2 });
    expect(await counts('development')).toEqual({ positive: 0, negative: 0, total: 0 });

    // A second vote on the same turn replaces the first.
    const changed = await t.app.http('POST', feedbackPath(project.projectID, 'erin'), {
      headers,
      body: { name: 'Thumbs up', text: ['Your order is on its way.'], lastUserTurn: { message: 'Track order' } },
    });
    expect(changed.status).toBe(200);
    const [after] = await transcriptsOf(project);
    expect(after!.feedback.map((f) => f.rating).sort()).toEqual(['positive', 'positive']);
    expect(await counts('production')).toEqual({ positive: 2, negative: 0, total: 2 });

    // The REST transcript shows them too.
    const rest = await t.app.http('GET', `/v1/transcript/${transcript!.id}`, { key: t.app.operatorToken });
    expect(rest.status, rest.text).toBe(200);
    expect(rest.body.transcript).toMatchObject({ device: 'desktop', browser: 'Chrome', os: 'Linux' });
    expect(rest.body.transcript.feedback).toHaveLength(2);
  });

  it('refuses transcripts and feedback while off, to other origins, for bad input and for users with no conversation', async () => {
    const project = await onProject();
    const headers = { origin: site };
    const client = { os: 'Linux', sessionID: 'frank' };
    const rating = { name: 'Thumbs down', text: ['Hi! How can I help?'], lastUserTurn: null };
    expect((await t.app.http('POST', transcriptsPath(project.projectID), { headers, body: client })).status).toBe(404);
    expect((await t.app.http('POST', feedbackPath(project.projectID, 'frank'), { headers, body: rating })).status).toBe(
      404,
    );
    const preOff = await t.app.http('OPTIONS', feedbackPath(project.projectID, 'frank'), {
      headers: { ...headers, 'access-control-request-method': 'POST' },
    });
    expect(preOff.status).toBe(404);

    await setSettings(t.app, project, { enabled: true, allowedOrigins: [site] });
    for (const path of [transcriptsPath(project.projectID), feedbackPath(project.projectID, 'frank')]) {
      const pre = await t.app.http('OPTIONS', path, {
        headers: {
          ...headers,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type,versionid',
        },
      });
      expect(pre.status, path).toBe(204);
      expect(pre.headers.get('access-control-allow-origin')).toBe(site);
      expect(pre.headers.get('access-control-allow-headers')).toBe('content-type, versionid');
      const preOther = await t.app.http('OPTIONS', path, {
        headers: { origin: other, 'access-control-request-method': 'POST' },
      });
      expect(preOther.status, path).toBe(403);
      expect(preOther.headers.get('access-control-allow-origin')).toBeNull();
    }

    // No conversation yet for this user ID: nothing to attach to, nothing created.
    const early = await t.app.http('POST', transcriptsPath(project.projectID), { headers, body: client });
    expect(early.status).toBe(404);
    expect(early.body.errorCode).toBe('NOT_FOUND');
    expect(await transcriptsOf(project)).toEqual([]);

    await t.app.http('POST', interactPath(project.projectID, 'frank'), { headers, body: launch });
    const fromOther = await t.app.http('POST', transcriptsPath(project.projectID), {
      headers: { origin: other },
      body: client,
    });
    expect(fromOther.status).toBe(403);
    const rateOther = await t.app.http('POST', feedbackPath(project.projectID, 'frank'), {
      headers: { origin: other },
      body: rating,
    });
    expect(rateOther.status).toBe(403);
    const badClient = await t.app.http('POST', transcriptsPath(project.projectID), {
      headers,
      body: { ...client, state: { variables: {} } },
    });
    expect(badClient.status).toBe(400);
    expect(badClient.body.errorCode).toBe('VALIDATION_FAILED');
    const badRating = await t.app.http('POST', feedbackPath(project.projectID, 'frank'), {
      headers,
      body: { name: 'Meh', text: [] },
    });
    expect(badRating.status).toBe(400);
    const noTurn = await t.app.http('POST', feedbackPath(project.projectID, 'frank'), {
      headers,
      body: { name: 'Thumbs up', text: ['Never said'], lastUserTurn: { message: 'Never typed' } },
    });
    expect(noTurn.status).toBe(404);
    const [stored] = await transcriptsOf(project);
    expect(stored).toMatchObject({ os: null, feedback: [] });

    // Feedback turned off: the feedback route is refused, the transcript one still answers.
    await setSettings(t.app, project, { feedback: false });
    const offRating = await t.app.http('POST', feedbackPath(project.projectID, 'frank'), { headers, body: rating });
    expect(offRating.status).toBe(404);
    expect(offRating.body.message).toBe('Feedback is not enabled for this web chat.');
    expect((await t.app.http('POST', transcriptsPath(project.projectID), { headers, body: client })).status).toBe(200);
  });

  it("cannot rate or describe another user's conversation", async () => {
    const project = await onProject();
    await setSettings(t.app, project, { enabled: true, allowedOrigins: [site] });
    const headers = { origin: site };
    await t.app.http('POST', interactPath(project.projectID, 'grace'), { headers, body: launch });
    await t.app.http('POST', interactPath(project.projectID, 'mallory'), { headers, body: launch });
    // Mallory's requests name Grace's texts, but land only on Mallory's own transcript.
    const rated = await t.app.http('POST', feedbackPath(project.projectID, 'mallory'), {
      headers,
      body: { name: 'Thumbs down', text: ['Hi! How can I help?'], lastUserTurn: null },
    });
    expect(rated.status).toBe(200);
    await t.app.http('POST', transcriptsPath(project.projectID), {
      headers,
      body: { os: 'Evil', sessionID: 'mallory' },
    });
    const byUser = Object.fromEntries((await transcriptsOf(project)).map((tr) => [tr.userID, tr]));
    expect(byUser.grace).toMatchObject({ os: null, feedback: [] });
    expect(byUser.mallory).toMatchObject({ os: 'Evil', feedback: [{ rating: 'negative' }] });
    // The answers name only what the caller sent and the turn ID of its own conversation.
    expect(Object.keys(rated.body).sort()).toEqual(['rating', 'turnID']);
  });

  it('serves the widget build from its npm package with its licence, and nothing from a CDN', async () => {
    const bundle = await t.app.http('GET', '/web-chat/bundle.mjs');
    expect(bundle.status).toBe(200);
    expect(bundle.headers.get('content-type')).toContain('text/javascript');
    expect(bundle.headers.get('x-widget-version')).toBe('1.65.2');
    expect(bundle.text).toContain('window.voiceflow');
    const license = await t.app.http('GET', '/web-chat/LICENSE');
    expect(license.status).toBe(200);
    expect(license.headers.get('content-type')).toContain('text/plain');
    expect(license.text).toContain('MIT License');
    expect(license.text).toContain('@voiceflow/react-chat 1.65.2');
  });

  it('offers no route to state, transcripts, analytics or the knowledge base', async () => {
    const project = await onProject();
    await setSettings(t.app, project, { enabled: true, allowedOrigins: [site] });
    const headers = { origin: site };
    await t.app.http('POST', interactPath(project.projectID, 'carol'), { headers, body: launch });
    for (const [method, path] of [
      ['GET', `/public/${project.projectID}/state/user/carol`],
      ['DELETE', `/public/${project.projectID}/state/user/carol`],
      ['GET', `/public/${project.projectID}/transcripts`],
      ['GET', `/public/${project.projectID}/transcripts/carol`],
      ['GET', `/feedback/${project.projectID}/user/carol`],
      ['GET', `/public/${project.projectID}/usage`],
      ['POST', `/public/${project.projectID}/knowledge-base/query`],
    ] as const) {
      const res = await t.app.http(method, path, { headers, body: method === 'POST' ? { question: 'x' } : undefined });
      expect(res.status, `${method} ${path}`).toBe(404);
    }
    // The keyed routes still need a key, whatever the origin.
    const keyed = await t.app.http('GET', `/v2/project/${project.projectID}/user/carol/state`, { headers });
    expect(keyed.status).toBe(401);
  });
});

describeEachDatabase('web chat rate limits', (provider) => {
  // Behind a trusted loopback proxy, X-Forwarded-For names the client address.
  const t = useTestApp(provider, { env: { RATE_LIMIT_RUNTIME: '3/60', TRUST_PROXY: 'loopback' } });

  it('limits turns per user ID across addresses, and per client address across user IDs', async () => {
    const project = await t.app.createProject({ scopes: ['admin'] });
    await publish(t.app, project.projectID, program);
    await setSettings(t.app, project, { enabled: true, allowedOrigins: [site] });
    const turn = (user: string, address: string) =>
      t.app.http('POST', interactPath(project.projectID, user), {
        headers: { origin: site, 'x-forwarded-for': address },
        body: launch,
      });
    // One user ID from four addresses: the user's own budget (3) runs out.
    const byUser = [];
    for (const address of ['10.1.0.1', '10.1.0.2', '10.1.0.3', '10.1.0.4'])
      byUser.push((await turn('dave', address)).status);
    expect(byUser).toEqual([200, 200, 200, 429]);
    // One address with four user IDs: the address's budget runs out.
    const byAddress = [];
    for (const user of ['u1', 'u2', 'u3', 'u4']) byAddress.push((await turn(user, '10.2.0.1')).status);
    expect(byAddress).toEqual([200, 200, 200, 429]);
    const refused = await turn('u5', '10.2.0.1');
    expect(refused.status).toBe(429);
    expect(refused.body.errorCode).toBe('RATE_LIMITED');
    expect(refused.headers.get('retry-after')).not.toBeNull();
  });
});

describeEachDatabase('web chat rate limits of transcripts and feedback', (provider) => {
  const t = useTestApp(provider, {
    env: { RATE_LIMIT_DEFAULT: '3/60', RATE_LIMIT_RUNTIME: '100/60', TRUST_PROXY: 'loopback' },
  });

  it('limits feedback and transcripts per user ID across addresses, and per client address', async () => {
    const project = await t.app.createProject({ scopes: ['admin'] });
    await publish(t.app, project.projectID, program);
    await setSettings(t.app, project, { enabled: true, allowedOrigins: [site] });
    const headers = (address: string) => ({ origin: site, 'x-forwarded-for': address });
    for (const user of ['hank', 'ivy'])
      await t.app.http('POST', interactPath(project.projectID, user), { headers: headers('10.9.0.1'), body: launch });
    const rate = (user: string, address: string) =>
      t.app.http('POST', `/feedback/${project.projectID}/user/${user}`, {
        headers: headers(address),
        body: { name: 'Thumbs up', text: ['Hi! How can I help?'], lastUserTurn: null },
      });
    const byUser = [];
    for (const address of ['10.3.0.1', '10.3.0.2', '10.3.0.3', '10.3.0.4'])
      byUser.push((await rate('hank', address)).status);
    expect(byUser).toEqual([200, 200, 200, 429]);
    const describe = (address: string) =>
      t.app.http('POST', `/public/${project.projectID}/transcripts`, {
        headers: headers(address),
        body: { os: 'Linux', sessionID: 'ivy' },
      });
    const byAddress = [];
    for (let i = 0; i < 4; i++) byAddress.push((await describe('10.4.0.1')).status);
    expect(byAddress).toEqual([200, 200, 200, 429]);
    const limited = await describe('10.4.0.1');
    expect(limited.body.errorCode).toBe('RATE_LIMITED');
  });
});
