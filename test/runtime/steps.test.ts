import { afterAll, beforeAll, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { interact, type LocalApi, publish, recordingRecorder, startLocalApi } from '../helpers/runtime';

/** Every step type, through the real HTTP interface (the non-stream endpoint unless noted). */

interface TraceData {
  type: string;
  payload: Record<string, unknown> | null;
  paths?: { event: { type: string } }[];
  defaultPath?: number;
}

/** Leave out block and flow traces, keep debug and path ones. */
const verbose = { excludeTypes: ['block', 'flow'] };

const texts = (traces: TraceData[]) => traces.filter((t) => t.type === 'text').map((t) => t.payload?.message);
const paths = (traces: TraceData[]) => traces.filter((t) => t.type === 'path').map((t) => t.payload?.path);

describeEachDatabase('runtime steps', (provider) => {
  const recorder = recordingRecorder();
  const t = useTestApp(provider, {
    env: { RUNTIME_CODE_TIMEOUT_MS: '300', RUNTIME_API_TIMEOUT_MS: '400', RUNTIME_CODE_MEMORY_MB: '8' },
    services: { turnRecorder: recorder },
  });
  let api: LocalApi;
  let project: { projectID: string; apiKey: string };
  beforeAll(async () => {
    api = await startLocalApi((req) => {
      if (req.url.startsWith('/orders/12345'))
        return { status: 200, body: { order: { id: 12345, status: 'shipped' }, items: [1, 2] } };
      if (req.url.startsWith('/echo')) return { status: 201, body: { got: JSON.parse(req.body || 'null') } };
      if (req.url.startsWith('/hang')) return { status: 200, body: {}, delayMs: 3000 };
      return { status: 500, body: { error: 'nope' } };
    });
    project = await t.app.createProject();
  });
  afterAll(async () => {
    await api?.close();
  });

  /** Publishes a one-flow program and returns a function running turns of one user. */
  async function agent(steps: unknown[], extra: Record<string, unknown> = {}) {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, {
      name: 'Agent',
      startFlow: 'main',
      flows: [{ id: 'main', start: (steps[0] as { id: string }).id, steps }],
      ...extra,
    });
    let n = 0;
    const user = `user-${n++}`;
    return {
      project: p,
      turn: async (action: unknown, body: Record<string, unknown> = {}) => {
        const res = await interact(t.app, p.apiKey, p.projectID, user, { action, config: verbose, ...body });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        return res.body as unknown as TraceData[];
      },
      state: async () =>
        (await t.app.http('GET', `/v2/project/${p.projectID}/user/${user}/state`, { key: p.apiKey })).body,
    };
  }

  it('message: fills placeholders (members too), picks one of its variants, passes the delay', async () => {
    const a = await agent(
      [
        {
          id: 'set',
          type: 'set',
          assignments: [{ variable: 'order', value: '{"status": "packed", "n": 3}' }],
          next: 'm1',
        },
        {
          id: 'm1',
          type: 'message',
          message: 'Order {order.status} with {order.n} items, {missing_is_blank}.',
          next: 'm2',
        },
        { id: 'm2', type: 'message', message: ['one', 'two', 'three'], delay: 250 },
      ],
      { variables: [{ name: 'order' }, { name: 'missing_is_blank' }] },
    );
    const traces = await a.turn({ type: 'launch' });
    const [first, second] = traces.filter((tr) => tr.type === 'text');
    expect(first!.payload).toEqual({
      message: 'Order packed with 3 items, .',
      // The original's rich-text object, which its clients render (docs/dialog-manager.md).
      slate: {
        id: expect.stringMatching(/^[0-9a-f]{24}$/),
        content: [{ children: [{ text: 'Order packed with 3 items, .' }] }],
      },
    });
    expect(['one', 'two', 'three']).toContain(second!.payload!.message);
    expect(second!.payload!.delay).toBe(250);
  });

  it('choice: a button request, the label as words, an intent, no match (reprompt or path), no reply', async () => {
    const a = await agent(
      [
        {
          id: 'menu',
          type: 'choice',
          buttons: [
            { label: 'Track order', next: 'track' },
            { label: 'Billing', next: 'billing', intent: 'billing' },
          ],
          intents: [{ intent: 'goodbye', next: 'bye' }],
          noReply: { timeout: 20, reprompts: ['Still there?'] },
        },
        { id: 'track', type: 'message', message: 'tracking', next: 'menu' },
        { id: 'billing', type: 'message', message: 'billing', next: 'menu' },
        { id: 'bye', type: 'message', message: 'bye' },
      ],
      {
        intents: [
          { name: 'billing', utterances: ['question about my invoice', 'I was charged twice', 'billing problem'] },
          { name: 'goodbye', utterances: ['goodbye', 'see you later', 'bye now'] },
        ],
      },
    );
    const launch = await a.turn({ type: 'launch' });
    const choice = launch.find((tr) => tr.type === 'choice')!;
    const buttons = choice.payload!.buttons as {
      name: string;
      request: { type: string; payload: { label: string } };
    }[];
    expect(buttons.map((b) => b.name)).toEqual(['Track order', 'Billing']);
    expect(launch.find((tr) => tr.type === 'no-reply')?.payload).toEqual({ timeout: 20 });

    const pressed = await a.turn(buttons[0]!.request);
    expect(paths(pressed)).toEqual(['choice:1']);
    expect(texts(pressed)).toEqual(['tracking']);

    const typed = await a.turn({ type: 'text', payload: '  track ORDER ' });
    expect(texts(typed)).toEqual(['tracking']);

    const byIntent = await a.turn({ type: 'text', payload: 'I think I was charged twice' });
    expect(paths(byIntent)).toEqual(['choice:2']);

    const confused = await a.turn({ type: 'text', payload: 'purple elephants' });
    expect(paths(confused)).toEqual(['choice:else']);
    expect(texts(confused)).toEqual(["Sorry, I didn't get that."]);
    expect(confused.some((tr) => tr.type === 'choice')).toBe(true);

    const silent = await a.turn({ type: 'no-reply' });
    expect(paths(silent)).toEqual(['choice:no-reply']);
    expect(texts(silent)).toEqual(['Still there?']);

    const leaving = await a.turn({ type: 'intent', payload: { intent: { name: 'goodbye' }, query: '' } });
    expect(paths(leaving)).toEqual(['choice:intent:goodbye']);
    expect(texts(leaving)).toEqual(['bye']);
  });

  it('capture: whole words, numbers, e-mail, dates, a program entity, with reprompts', async () => {
    const a = await agent(
      [
        { id: 'c1', type: 'capture', variable: 'words', next: 'c2' },
        { id: 'c2', type: 'capture', variable: 'qty', entity: { type: 'number' }, next: 'c3' },
        {
          id: 'c3',
          type: 'capture',
          variable: 'email',
          entity: { type: 'email' },
          noMatch: { reprompts: ['An e-mail address, please.'] },
          next: 'c4',
        },
        { id: 'c4', type: 'capture', variable: 'when', entity: { type: 'date' }, next: 'c5' },
        {
          id: 'c5',
          type: 'capture',
          variable: 'order_id',
          entity: 'order_id',
          noMatch: { next: 'lost' },
          next: 'done',
        },
        { id: 'done', type: 'message', message: '{words}|{qty}|{email}|{when}|{order_id}' },
        { id: 'lost', type: 'message', message: 'no order id' },
      ],
      {
        variables: ['words', 'qty', 'email', 'when', 'order_id'].map((name) => ({ name })),
        entities: [{ name: 'order_id', type: 'regex', pattern: '\\b(\\d{5})\\b' }],
      },
    );
    await a.turn({ type: 'launch' });
    expect(paths(await a.turn({ type: 'text', payload: 'hello there' }))).toEqual(['capture:captured']);
    await a.turn({ type: 'text', payload: 'make it twelve' });
    const noEmail = await a.turn({ type: 'text', payload: 'I would rather not' });
    expect(paths(noEmail)).toEqual(['capture:else']);
    expect(texts(noEmail)).toEqual(['An e-mail address, please.']);
    await a.turn({ type: 'text', payload: 'fine: Ana.Lee@example.org' });
    await a.turn({ type: 'text', payload: 'on March 5, 2027 please' });
    const done = await a.turn({ type: 'text', payload: 'it is order 54321' });
    expect(texts(done)).toEqual(['hello there|12|Ana.Lee@example.org|2027-03-05|54321']);
    expect((await a.state()).variables.qty).toBe(12);
  });

  it('capture: an intent action’s entity fills the variable; a miss takes the no-match path', async () => {
    const a = await agent(
      [
        { id: 'c', type: 'capture', variable: 'order_id', entity: 'order_id', noMatch: { next: 'lost' }, next: 'ok' },
        { id: 'ok', type: 'message', message: 'got {order_id}' },
        { id: 'lost', type: 'message', message: 'no order id' },
      ],
      { variables: [{ name: 'order_id' }], entities: [{ name: 'order_id', type: 'regex', pattern: '\\d{5}' }] },
    );
    await a.turn({ type: 'launch' });
    const given = await a.turn({
      type: 'intent',
      payload: { intent: { name: 'anything' }, query: '', entities: [{ name: 'order_id', value: '77777' }] },
    });
    expect(texts(given)).toEqual(['got 77777']);
    await a.turn({ type: 'launch' });
    expect(texts(await a.turn({ type: 'text', payload: 'no idea' }))).toEqual(['no order id']);
  });

  it('condition: if / else if / else over expressions; a failing expression counts as false', async () => {
    const a = await agent(
      [
        { id: 'ask', type: 'capture', variable: 'age', entity: { type: 'number' }, next: 'check' },
        {
          id: 'check',
          type: 'condition',
          branches: [
            { if: '$lowercase(age) = "x"', next: 'weird' },
            { if: 'age >= 18 and age < 65', next: 'adult' },
            { if: 'age >= 65', next: 'senior' },
          ],
          else: 'minor',
        },
        { id: 'adult', type: 'message', message: 'adult' },
        { id: 'senior', type: 'message', message: 'senior' },
        { id: 'minor', type: 'message', message: 'minor' },
        { id: 'weird', type: 'message', message: 'weird' },
      ],
      { variables: [{ name: 'age' }] },
    );
    for (const [age, expected, path] of [
      ['30', 'adult', 'condition:2'],
      ['70', 'senior', 'condition:3'],
      ['7', 'minor', 'condition:else'],
    ] as const) {
      await a.turn({ type: 'launch' });
      const traces = await a.turn({ type: 'text', payload: age });
      expect(texts(traces)).toEqual([expected]);
      expect(paths(traces)).toContain(path);
      // $lowercase of a number fails: reported, then treated as false.
      expect(traces.find((tr) => tr.type === 'debug')?.payload).toMatchObject({
        type: 'error',
        message: expect.stringContaining('Condition 1'),
      });
    }
  });

  it('set: assigns in order from expressions; a failing one leaves its variable and says why', async () => {
    const a = await agent(
      [
        {
          id: 's',
          type: 'set',
          assignments: [
            { variable: 'a', value: '2' },
            { variable: 'b', value: 'a * 21' },
            { variable: 'greeting', value: '"Hi " & $uppercase(name)' },
            { variable: 'list', value: '[1, 2, 3][$ > 1]' },
            { variable: 'kept', value: '$number("not a number")' },
          ],
          next: 'm',
        },
        { id: 'm', type: 'message', message: '{b} {greeting} {list} {kept}' },
      ],
      {
        variables: [
          { name: 'a' },
          { name: 'b' },
          { name: 'greeting' },
          { name: 'name', default: 'sam' },
          { name: 'list' },
          { name: 'kept', default: 'old' },
        ],
      },
    );
    const traces = await a.turn({ type: 'launch' });
    expect(texts(traces)).toEqual(['42 Hi SAM [2,3] old']);
    expect(traces.find((tr) => tr.type === 'debug')?.payload).toMatchObject({
      type: 'error',
      message: expect.stringContaining('"kept"'),
    });
  });

  it('api: templated request, response mappings, success and failure paths, a debug trace of type api, a timeout', async () => {
    const a = await agent(
      [
        {
          id: 'get',
          type: 'api',
          name: 'Order lookup',
          method: 'GET',
          url: '{base}/orders/{order_id}',
          query: { verbose: '{flag}' },
          headers: { 'x-customer': '{customer}' },
          responseMappings: [
            { variable: 'status', path: 'order.status' },
            { variable: 'count', path: '$count(items)' },
            { variable: 'http', path: '$status' },
          ],
          next: 'post',
          failure: 'failed',
        },
        {
          id: 'post',
          type: 'api',
          method: 'POST',
          url: '{base}/echo',
          body: { id: '{order_id}', note: 'status {status}', tags: ['{customer}'] },
          responseMappings: [{ variable: 'echo', path: 'got' }],
          next: 'bad',
        },
        { id: 'bad', type: 'api', method: 'DELETE', url: '{base}/missing', next: 'never', failure: 'slow' },
        {
          id: 'slow',
          type: 'api',
          method: 'GET',
          url: '{base}/hang',
          timeoutMs: 5000,
          failure: 'report',
          next: 'never',
        },
        { id: 'report', type: 'message', message: '{status} {count} {http} {echo.id} {echo.note} {echo.tags}' },
        { id: 'failed', type: 'message', message: 'lookup failed' },
        { id: 'never', type: 'message', message: 'never' },
      ],
      {
        variables: ['base', 'order_id', 'flag', 'customer', 'status', 'count', 'http', 'echo'].map((name) => ({
          name,
        })),
      },
    );
    const before = api.requests.length;
    const traces = await a.turn(
      { type: 'launch' },
      { variables: { base: api.url, order_id: 12345, flag: 'yes & more', customer: 'c-1' } },
    );
    expect(texts(traces)).toEqual(['shipped 2 200 12345 status shipped ["c-1"]']);
    expect(paths(traces)).toEqual(['api:success', 'api:success', 'api:failure', 'api:failure']);
    const calls = api.requests.slice(before);
    expect(calls[0]).toMatchObject({ method: 'GET', url: '/orders/12345?verbose=yes+%26+more' });
    expect(calls[0]!.headers['x-customer']).toBe('c-1');
    expect(calls[1]!.method).toBe('POST');
    expect(JSON.parse(calls[1]!.body)).toEqual({ id: 12345, note: 'status shipped', tags: ['c-1'] });
    expect(calls[1]!.headers['content-type']).toBe('application/json');
    const debug = traces.filter((tr) => tr.type === 'debug').map((tr) => tr.payload);
    expect(debug).toEqual([
      { type: 'api', message: expect.stringMatching(/^API GET .*\/orders\/12345 answered 200 in \d+ ms$/) },
      { type: 'api', message: expect.stringMatching(/^API POST .*\/echo answered 201/) },
      { type: 'api', message: expect.stringMatching(/DELETE .*\/missing failed after \d+ ms: status 500$/) },
      { type: 'api', message: expect.stringMatching(/hang failed after \d+ ms: timed out after 400 ms$/) },
    ]);
    const record = await recorder.waitFor((r) => r.projectID === a.project.projectID);
    expect(record.apiCalls.map((c) => [c.name, c.method, c.status, c.success])).toEqual([
      ['Order lookup', 'GET', 200, true],
      ['post', 'POST', 201, true],
      ['bad', 'DELETE', 500, false],
      ['slow', 'GET', null, false],
    ]);
    expect(record.apiCalls[0]!.url).toBe(`${api.url}/orders/12345`);
  });

  it('api: a templated method is filled when the step runs; one that is no HTTP method takes the failure path', async () => {
    const a = await agent(
      [
        {
          id: 'call',
          type: 'api',
          method: '{verb}',
          url: '{base}/echo',
          body: { n: 1 },
          responseMappings: [{ variable: 'got', path: 'got' }],
          next: 'ok',
          failure: 'failed',
        },
        { id: 'ok', type: 'message', message: 'ok {got}' },
        { id: 'failed', type: 'message', message: 'failed' },
      ],
      { variables: [{ name: 'base' }, { name: 'verb' }, { name: 'got' }] },
    );
    const before = api.requests.length;
    const run = async (verb: string) => {
      const traces = await a.turn({ type: 'launch' }, { variables: { base: api.url, verb } });
      return {
        texts: texts(traces),
        paths: paths(traces),
        debug: traces.filter((tr) => tr.type === 'debug').map((tr) => tr.payload),
      };
    };
    expect(await run('post')).toMatchObject({ texts: ['ok {"n":1}'], paths: ['api:success'] });
    expect(await run(' Put ')).toMatchObject({ texts: ['ok {"n":1}'], paths: ['api:success'] });
    // GET sends no body, whatever the step says.
    expect(await run('get')).toMatchObject({ texts: ['ok '], paths: ['api:success'] });
    expect(api.requests.slice(before).map((r) => [r.method, r.body])).toEqual([
      ['POST', '{"n":1}'],
      ['PUT', '{"n":1}'],
      ['GET', ''],
    ]);
    for (const verb of ['FETCH', '', 'po st', 'poſt']) {
      const outcome = await run(verb);
      expect(outcome.texts, verb).toEqual(['failed']);
      expect(outcome.paths).toEqual(['api:failure']);
      expect(outcome.debug).toEqual([
        {
          type: 'api',
          message: expect.stringContaining(
            `ms: invalid method ${JSON.stringify(verb.trim())}: must be GET, POST, PUT, PATCH or DELETE`,
          ),
        },
      ]);
    }
    expect(api.requests.length).toBe(before + 3);
    const record = await recorder.waitFor(
      (r) => r.projectID === a.project.projectID && r.apiCalls.some((c) => c.method === 'FETCH'),
    );
    expect(record.apiCalls).toEqual([
      expect.objectContaining({ stepID: 'call', method: 'FETCH', status: null, success: false }),
    ]);
  });

  it('code: reads and writes variables and picks a path, in a sandbox without network, files or endless loops', async () => {
    const code = (id: string, source: string, next = 'report') => ({
      id,
      type: 'code',
      code: source,
      paths: [{ name: 'big', next: 'big' }],
      next,
      failure: `${id}_failed`,
    });
    const report = (id: string, next: string) => ({
      id: `${id}_failed`,
      type: 'message',
      message: `${id} failed`,
      next,
    });
    const a = await agent(
      [
        code(
          'calc',
          'console.log("total is", variables.price * variables.qty);\nvariables.total = variables.price * variables.qty;\nvariables.stray = 1;\nif (variables.total > 100) return "big";',
          'net',
        ),
        report('calc', 'net'),
        { id: 'big', type: 'message', message: 'big order: {total}', next: 'net' },
        code('net', 'await fetch("http://127.0.0.1:9/")', 'files'),
        report('net', 'files'),
        code('files', 'const fs = await import("fs"); fs.readFileSync("/etc/passwd")', 'node'),
        report('files', 'node'),
        code('node', 'return typeof process + typeof require', 'loop'),
        report('node', 'loop'),
        code('loop', 'while (true) {}', 'memory'),
        report('loop', 'memory'),
        code('memory', 'const big = new Uint8Array(64 * 1024 * 1024); return "big";', 'report'),
        report('memory', 'report'),
        { id: 'report', type: 'message', message: 'total {total}' },
      ],
      { variables: [{ name: 'price', default: 30 }, { name: 'qty', default: 5 }, { name: 'total' }] },
    );
    const traces = await a.turn({ type: 'launch' });
    expect(texts(traces)).toEqual([
      'big order: 150',
      'net failed',
      'files failed',
      'node failed',
      'loop failed',
      'memory failed',
      'total 150',
    ]);
    expect(paths(traces)).toEqual([
      'code:big',
      'code:failure',
      'code:failure',
      'code:failure',
      'code:failure',
      'code:failure',
    ]);
    const debug = traces.filter((tr) => tr.type === 'debug').map((tr) => String(tr.payload?.message));
    expect(debug).toContain('total is 150');
    expect(debug).toContain('Code step "calc" ignored undeclared variables: stray');
    expect(debug.find((m) => m.includes('"net"'))).toMatch(/'fetch' is not defined/);
    expect(debug.find((m) => m.includes('"files"'))).toMatch(/could not load module 'fs'/);
    expect(debug.find((m) => m.includes('"node"'))).toMatch(/returned "undefinedundefined"/);
    expect(debug.find((m) => m.includes('"loop"'))).toMatch(/stopped after 300 ms/);
    expect(debug.find((m) => m.includes('"memory"'))).toMatch(/out of memory/);
    const record = await recorder.waitFor((r) => r.projectID === a.project.projectID);
    expect(record.functionCalls.map((c) => [c.name, c.success])).toEqual([
      ['calc', true],
      ['net', false],
      ['files', false],
      ['node', false],
      ['loop', false],
      ['memory', false],
    ]);
    expect((await a.state()).variables).toMatchObject({ total: 150 });
    expect((await a.state()).variables).not.toHaveProperty('stray');
  });

  it('wait, goto (a step, or a flow with a call stack), end', async () => {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, {
      name: 'Flows',
      startFlow: 'main',
      variables: [{ name: 'ms', default: 30 }],
      flows: [
        {
          id: 'main',
          name: 'Main',
          start: 'pause',
          steps: [
            { id: 'pause', type: 'wait', ms: 'ms * 2', next: 'jump' },
            { id: 'jump', type: 'goto', step: 'call' },
            { id: 'skipped', type: 'message', message: 'never' },
            { id: 'call', type: 'goto', flow: 'sub', next: 'back' },
            { id: 'back', type: 'message', message: 'back in main', next: 'stop' },
            { id: 'stop', type: 'end' },
          ],
        },
        {
          id: 'sub',
          name: 'Sub',
          start: 'inside',
          steps: [{ id: 'inside', type: 'message', message: 'in sub' }],
        },
      ],
    });
    const res = await interact(t.app, p.apiKey, p.projectID, 'u', {
      action: { type: 'launch' },
      config: { excludeTypes: [] },
    });
    const traces = res.body as unknown as TraceData[];
    expect(
      traces.map((tr) =>
        tr.type === 'block'
          ? `block:${tr.payload?.blockID}`
          : tr.type === 'flow'
            ? `flow:${tr.payload?.diagramID}`
            : tr.type,
      ),
    ).toEqual([
      'flow:main',
      'block:pause',
      'block:jump',
      'block:call',
      'flow:sub',
      'block:inside',
      'text',
      'flow:main',
      'block:back',
      'text',
      'block:stop',
      'end',
    ]);
    expect(texts(traces)).toEqual(['in sub', 'back in main']);
    const state = await t.app.http('GET', `/v2/project/${p.projectID}/user/u/state`, { key: p.apiKey });
    expect(state.body.stack).toEqual([]);
    // After the end, any action starts over.
    const again = await interact(t.app, p.apiKey, p.projectID, 'u', { action: { type: 'text', payload: 'hi' } });
    expect(texts(again.body as unknown as TraceData[])).toEqual(['in sub', 'back in main']);
  });

  it('handoff: a message, then a live-agent-handoff trace with its data; the conversation ends', async () => {
    const a = await agent(
      [
        {
          id: 'h',
          type: 'handoff',
          message: 'Connecting you, {name}…',
          data: { queue: 'support', customer: '{name}', priority: 2 },
        },
      ],
      { variables: [{ name: 'name', default: 'Rae' }] },
    );
    const traces = await a.turn({ type: 'launch' });
    // The conversation ended, so the turn closes with an end trace.
    expect(traces.map((tr) => tr.type)).toEqual(['text', 'live-agent-handoff', 'end']);
    expect(traces[1]!.payload).toEqual({ queue: 'support', customer: 'Rae', priority: 2 });
    expect((await a.state()).stack).toEqual([]);
  });

  it('custom action: stops the turn with its own trace and paths; the chosen path resumes it', async () => {
    const a = await agent(
      [
        {
          id: 'pay',
          type: 'custom',
          action: 'open_checkout',
          payload: { amount: '{amount}', currency: 'EUR' },
          paths: [
            { event: 'paid', next: 'thanks' },
            { event: 'cancelled', next: 'sorry' },
          ],
          defaultPath: 1,
        },
        { id: 'thanks', type: 'message', message: 'Paid: {last_event.payload.ref}' },
        { id: 'sorry', type: 'message', message: 'Cancelled' },
      ],
      { variables: [{ name: 'amount', default: 12.5 }] },
    );
    const stopped = await a.turn({ type: 'launch' });
    expect(stopped).toEqual([
      {
        type: 'open_checkout',
        payload: { amount: 12.5, currency: 'EUR' },
        paths: [{ event: { type: 'paid' } }, { event: { type: 'cancelled' } }],
        defaultPath: 1,
        time: expect.any(Number),
      },
    ]);
    const resumed = await a.turn({ type: 'paid', payload: { ref: 'r-9' } });
    expect(paths(resumed)).toEqual(['custom:paid']);
    expect(texts(resumed)).toEqual(['Paid: r-9']);
    // With stopTypes that do not name it, the turn goes on along the default path.
    const through = await a.turn({ type: 'launch' }, { config: { ...verbose, stopTypes: ['something_else'] } });
    expect(through.map((tr) => tr.type)).toEqual(['open_checkout', 'path', 'text', 'end']);
    expect(texts(through)).toEqual(['Cancelled']);
  });

  it('NLU: text matched to intents above the threshold, intent actions skip matching, global triggers return', async () => {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, {
      name: 'NLU',
      startFlow: 'main',
      variables: [{ name: 'order_id' }],
      entities: [{ name: 'order_id', type: 'regex', pattern: '\\b\\d{5}\\b' }],
      intents: [
        {
          name: 'track',
          utterances: ['where is my order', 'track my package', 'where is order {order_id}'],
          entities: ['order_id'],
        },
        { name: 'human', utterances: ['talk to a person', 'speak to a human', 'real agent please'] },
      ],
      triggers: [{ intent: 'human', goTo: { flow: 'human' } }],
      nlu: { confidenceThreshold: 0.55 },
      flows: [
        {
          id: 'main',
          start: 'menu',
          steps: [
            {
              id: 'menu',
              type: 'choice',
              buttons: [{ label: 'Track', intent: 'track', next: 'tracked' }],
              noMatch: { next: 'fallback' },
            },
            { id: 'tracked', type: 'message', message: 'tracking {order_id}', next: 'menu' },
            { id: 'fallback', type: 'message', message: 'fallback', next: 'menu' },
          ],
        },
        { id: 'human', start: 'say', steps: [{ id: 'say', type: 'message', message: 'a person will call' }] },
      ],
    });
    const turn = async (action: unknown) =>
      (await interact(t.app, p.apiKey, p.projectID, 'nlu', { action, config: verbose })).body as unknown as TraceData[];
    await turn({ type: 'launch' });
    expect(texts(await turn({ type: 'text', payload: 'where is order 24680?' }))).toEqual(['tracking 24680']);
    expect(texts(await turn({ type: 'text', payload: 'pineapple pizza recipe' }))).toEqual(['fallback']);
    // A global trigger runs its flow, then the user is back at the question they were asked.
    const human = await turn({ type: 'text', payload: 'can I speak to a human' });
    expect(texts(human)).toEqual(['a person will call']);
    expect(human.at(-1)?.type).toBe('choice');
    const direct = await turn({ type: 'intent', payload: { intent: { name: 'track' }, query: 'x', confidence: 0.42 } });
    expect(texts(direct)).toEqual(['tracking 24680']);
    const record = await recorder.waitFor((r) => r.projectID === p.projectID && r.action.type === 'intent');
    expect(record.intents).toEqual([{ name: 'track', confidence: 0.42, source: 'request' }]);
    const matched = recorder.records.filter((r) => r.projectID === p.projectID && r.interactionType === 'text');
    expect(matched.map((r) => r.intents.map((i) => i.name))).toEqual([['track'], [], ['human']]);
    expect(matched[0]!.intents[0]!.confidence).toBeGreaterThanOrEqual(0.55);
    const state = await t.app.http('GET', `/v2/project/${p.projectID}/user/nlu/state`, { key: p.apiKey });
    expect(state.body.variables.intent_confidence).toBe(42);
  });

  it('launch clears the stack and flow storage but keeps variables, and counts sessions', async () => {
    const a = await agent(
      [
        { id: 'inc', type: 'set', assignments: [{ variable: 'n', value: 'n + 1' }], next: 'ask' },
        { id: 'ask', type: 'capture', variable: 'n' },
      ],
      { variables: [{ name: 'n', default: 0 }] },
    );
    await a.turn({ type: 'launch' });
    await a.turn({ type: 'launch' }, { variables: { n: 10 } });
    const state = await a.state();
    expect(state.variables).toMatchObject({ n: 11, sessions: 2 });
    expect(state.stack).toHaveLength(1);
    expect(project.projectID).toBeTruthy();
  });
});
