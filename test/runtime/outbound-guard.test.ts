import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOutboundFetch, guardedLookup, isPrivateAddress, PrivateAddressError } from '../../src/lib/outbound-http';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { interact, type LocalApi, publish, startLocalApi } from '../helpers/runtime';

/** API steps call URLs chosen by agent authors: private addresses are refused unless allowed. */

describe('isPrivateAddress', () => {
  it.each([
    '127.0.0.1',
    '127.255.0.9',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::1',
    '::',
    'fe80::1',
    'fd00::1',
    'fc12:3456::1',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:a9fe:a9fe',
    'not-an-address',
  ])('refuses %s', (address) => {
    expect(isPrivateAddress(address)).toBe(true);
  });

  it.each(['8.8.8.8', '1.1.1.1', '172.32.0.1', '192.169.0.1', '100.128.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8'])(
    'allows %s',
    (address) => {
      expect(isPrivateAddress(address)).toBe(false);
    },
  );

  it('the lookup guard refuses a name that resolves to loopback', async () => {
    const err = await new Promise<Error | null>((resolve) =>
      guardedLookup('localhost', { family: 0 }, (e) => resolve(e as Error | null)),
    );
    expect(err).toBeInstanceOf(PrivateAddressError);
  });
});

interface Seen {
  url: string;
  headers: IncomingHttpHeaders;
}

async function listen(
  handler: (url: string, headers: IncomingHttpHeaders) => [number, Record<string, string>, string],
) {
  const seen: Seen[] = [];
  const server: Server = createServer((req, res) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    const [status, headers, body] = handler(req.url ?? '', req.headers);
    res.writeHead(status, headers);
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { origin, seen, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

describe('createOutboundFetch', () => {
  let a: Awaited<ReturnType<typeof listen>>;
  let b: Awaited<ReturnType<typeof listen>>;
  beforeAll(async () => {
    b = await listen((url) => [200, { 'content-type': 'text/plain' }, `b:${url}`]);
    a = await listen((url) => {
      const hops = /^\/hops\/(\d+)$/.exec(url);
      if (hops) {
        const n = Number(hops[1]);
        return n === 0 ? [200, {}, 'arrived'] : [302, { location: `/hops/${n - 1}` }, ''];
      }
      if (url === '/to-b') return [307, { location: `${b.origin}/landed` }, ''];
      if (url === '/see-other') return [303, { location: '/hops/0' }, ''];
      return [200, {}, `a:${url}`];
    });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  it('refuses loopback literals, localhost and names resolving to private addresses, before sending anything', async () => {
    const guarded = createOutboundFetch({ allowPrivate: false });
    try {
      const port = new URL(a.origin).port;
      for (const url of [`${a.origin}/x`, `http://localhost:${port}/x`, `http://[::1]:${port}/x`]) {
        const err = (await guarded(url).catch((e: unknown) => e)) as Error;
        expect(err, url).toBeInstanceOf(TypeError);
        expect(err.cause, url).toBeInstanceOf(PrivateAddressError);
      }
      expect(a.seen.filter((s) => s.url === '/x')).toHaveLength(0);
    } finally {
      await guarded.close();
    }
  });

  it('when allowed, follows redirects one by one up to the limit', async () => {
    const allowed = createOutboundFetch({ allowPrivate: true, maxRedirects: 3 });
    try {
      const ok = await allowed(`${a.origin}/hops/3`);
      expect(ok.status).toBe(200);
      expect(await ok.text()).toBe('arrived');
      const err = (await allowed(`${a.origin}/hops/4`).catch((e: unknown) => e)) as Error;
      expect((err.cause as Error).message).toBe('more than 3 redirects');
      const manual = await allowed(`${a.origin}/hops/1`, { redirect: 'manual' });
      expect(manual.status).toBe(302);
    } finally {
      await allowed.close();
    }
  });

  it('drops credentials on a cross-origin redirect and turns 303 into a GET without a body', async () => {
    const allowed = createOutboundFetch({ allowPrivate: true });
    try {
      const res = await allowed(`${a.origin}/to-b`, { headers: { authorization: 'Bearer secret', 'x-kept': '1' } });
      expect(await res.text()).toBe('b:/landed');
      const landed = b.seen.find((s) => s.url === '/landed');
      expect(landed?.headers.authorization).toBeUndefined();
      expect(landed?.headers['x-kept']).toBe('1');
      const first = a.seen.find((s) => s.url === '/to-b');
      expect(first?.headers.authorization).toBe('Bearer secret');

      const posted = await allowed(`${a.origin}/see-other`, {
        method: 'POST',
        body: '{"a":1}',
        headers: { 'content-type': 'application/json' },
      });
      expect(await posted.text()).toBe('arrived');
      const followed = a.seen.filter((s) => s.url === '/hops/0').at(-1);
      expect(followed?.headers['content-type']).toBeUndefined();
    } finally {
      await allowed.close();
    }
  });
});

describeEachDatabase('API steps and private addresses', (provider) => {
  const t = useTestApp(provider, { env: { RUNTIME_ALLOW_PRIVATE_URLS: 'false', RUNTIME_API_TIMEOUT_MS: '2000' } });
  let api: LocalApi;
  beforeAll(async () => {
    api = await startLocalApi(() => ({ status: 200, body: { secret: 'internal' } }));
  });
  afterAll(async () => {
    await api?.close();
  });

  it('an API step aimed at a loopback service takes its failure path and the service sees no request', async () => {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, {
      name: 'Agent',
      startFlow: 'main',
      flows: [
        {
          id: 'main',
          start: 'call',
          steps: [
            {
              id: 'call',
              type: 'api',
              method: 'GET',
              url: `${api.url}/metadata`,
              responseMappings: [{ variable: 'leak', path: 'secret' }],
              next: 'ok',
              failure: 'refused',
            },
            { id: 'ok', type: 'message', message: 'got {leak}' },
            { id: 'refused', type: 'message', message: 'refused' },
          ],
        },
      ],
      variables: [{ name: 'leak', default: '' }],
    });
    const res = await interact(t.app, p.apiKey, p.projectID, 'u1', {
      action: { type: 'launch' },
      config: { excludeTypes: ['block', 'flow'] },
    });
    expect(res.status).toBe(200);
    const traces = res.body as { type: string; payload: { message?: string; type?: string } }[];
    expect(traces.filter((x) => x.type === 'text').map((x) => x.payload.message)).toEqual(['refused']);
    const debug = traces.find((x) => x.type === 'debug' && x.payload.type === 'api');
    expect(debug?.payload.message).toMatch(/private, loopback or link-local/);
    expect(api.requests).toHaveLength(0);
  });
});
