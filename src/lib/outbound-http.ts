import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { Agent, fetch as undiciFetch } from 'undici';

/**
 * Outbound HTTP to addresses that users choose (a runtime API step's URL, a knowledge-base URL
 * upload). Without a guard such a request is a server-side request forgery: an agent author could
 * read the cloud metadata service, the database's admin port or anything else on the server's
 * network. The guard refuses private, loopback, link-local and other special addresses:
 *
 * - for a host name, at connection time, on the address DNS actually returned (so a name that
 *   resolves to 127.0.0.1, or changes its answer between a check and the connection, is caught);
 * - for an address literal, before connecting;
 * - on every redirect hop, since redirects are followed here one by one.
 *
 * Operators who need agents to call services on their own network set the relevant
 * `*_ALLOW_PRIVATE_URLS=true` flag (docs/configuration.md).
 */

const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], // "this" network
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata services
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const)
  blocked.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['64:ff9b::', 96], // NAT64 (embeds an IPv4 address)
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4 (embeds an IPv4 address)
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['ff00::', 8], // multicast
] as const)
  blocked.addSubnet(net, prefix, 'ipv6');

/** Whether an IP address is private, loopback, link-local or otherwise not on the public internet. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family !== 6) return true; // not an address: refuse rather than guess
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return blocked.check(mapped[1] as string, 'ipv4');
  // ::ffff:7f00:1 — an IPv4-mapped address written in hex.
  const mappedHex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
  if (mappedHex) {
    const hi = Number.parseInt(mappedHex[1] as string, 16);
    const lo = Number.parseInt(mappedHex[2] as string, 16);
    return blocked.check(`${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`, 'ipv4');
  }
  return blocked.check(address, 'ipv6');
}

/** Raised (as the cause of the fetch error, or directly) when an address is refused. */
export class PrivateAddressError extends Error {
  readonly code = 'PRIVATE_ADDRESS';
  constructor(readonly host: string) {
    super(`${host} is a private, loopback or link-local address, which this server does not call`);
    this.name = 'PrivateAddressError';
  }
}

/** `dns.lookup` that fails for a name resolving to a refused address (exported for its test). */
export const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) {
      callback(err, '', 0);
      return;
    }
    const list = addresses as unknown as LookupAddress[];
    const refused = list.find((a) => isPrivateAddress(a.address));
    if (refused || list.length === 0) {
      callback(new PrivateAddressError(`${hostname} (${refused?.address ?? 'no address'})`), '', 0);
      return;
    }
    if (options.all) (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
    else callback(null, (list[0] as LookupAddress).address, (list[0] as LookupAddress).family);
  });
};

export interface OutboundHttpOptions {
  /** Allow private, loopback and link-local destinations (default false). */
  allowPrivate: boolean;
  /** Redirects followed before giving up (default 5). */
  maxRedirects?: number;
}

/** A `fetch` for user-chosen URLs: address guard, redirects followed one by one (each one checked). */
export type OutboundFetch = (input: URL | string, init?: RequestInit) => Promise<Response>;

function hostOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/**
 * Builds the guarded fetch. With `allowPrivate` it is plain fetch with a redirect limit; the
 * returned function owns a connection pool, closed by `close()`.
 */
export function createOutboundFetch(opts: OutboundHttpOptions): OutboundFetch & { close(): Promise<void> } {
  const maxRedirects = opts.maxRedirects ?? 5;
  const dispatcher = new Agent(opts.allowPrivate ? {} : { connect: { lookup: guardedLookup } });
  const fetchOnce = (url: URL, init: RequestInit): Promise<Response> => {
    if (!opts.allowPrivate) {
      const host = hostOf(url);
      if (isIP(host) && isPrivateAddress(host))
        return Promise.reject(new TypeError('fetch failed', { cause: new PrivateAddressError(host) }));
      if (host === 'localhost' || host.endsWith('.localhost'))
        return Promise.reject(new TypeError('fetch failed', { cause: new PrivateAddressError(host) }));
    }
    return undiciFetch(url, {
      ...(init as Parameters<typeof undiciFetch>[1]),
      redirect: 'manual',
      dispatcher,
    }) as unknown as Promise<Response>;
  };
  const outbound = async (input: URL | string, init: RequestInit = {}): Promise<Response> => {
    let url = new URL(input);
    let requestInit = { ...init };
    for (let hop = 0; ; hop++) {
      if (url.protocol !== 'http:' && url.protocol !== 'https:')
        throw new TypeError('fetch failed', { cause: new Error(`unsupported URL scheme ${url.protocol}`) });
      const response = await fetchOnce(url, requestInit);
      const location = response.headers.get('location');
      if (response.status < 300 || response.status > 399 || !location || init.redirect === 'manual') return response;
      await response.body?.cancel();
      if (init.redirect === 'error' || hop >= maxRedirects)
        throw new TypeError('fetch failed', { cause: new Error(`more than ${maxRedirects} redirects`) });
      const next = new URL(location, url);
      if (next.origin !== url.origin) {
        // Credentials meant for one origin are not handed to another (as fetch does).
        const headers = new Headers(requestInit.headers);
        headers.delete('authorization');
        headers.delete('cookie');
        headers.delete('proxy-authorization');
        requestInit = { ...requestInit, headers };
      }
      url = next;
      // 303, and 301/302 after a POST, turn into a GET without a body (what browsers and fetch do).
      const method = (requestInit.method ?? 'GET').toUpperCase();
      if (response.status === 303 || ((response.status === 301 || response.status === 302) && method === 'POST')) {
        const headers = new Headers(requestInit.headers);
        headers.delete('content-type');
        headers.delete('content-length');
        requestInit = { ...requestInit, method: method === 'HEAD' ? 'HEAD' : 'GET', body: undefined, headers };
      }
    }
  };
  return Object.assign(outbound, { close: () => dispatcher.close() });
}
