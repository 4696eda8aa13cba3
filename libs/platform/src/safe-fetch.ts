/**
 * SSRF-guarded fetching. Every server-side fetch of a user-supplied URL (image uploads by URL, product
 * images, scene references, webhook deliveries) goes through safeFetch: the host is resolved and every
 * address checked, the connection is pinned to the checked address (no second DNS answer can sneak in,
 * i.e. DNS rebinding), redirects are followed by hand and re-checked, and size and time are bounded.
 */
import { createHash } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import { rootCertificates } from 'node:tls';
import ipaddr from 'ipaddr.js';
import { Agent, type Dispatcher, request } from 'undici';

export interface SafeFetchOptions {
  maxBytes: number;
  /**
   * The fetch's total time budget: DNS, connect, every redirect hop, the headers AND the whole body. A body
   * that drips or stalls ends in a 'timeout' SafeFetchError when it runs out. Keep it below the deadline of
   * the gRPC call that waits for the fetch (GRPC_DEADLINE_MS, 30 s), so the caller answers with its own error.
   */
  timeoutMs: number;
  /** A deadline of the caller's (e.g. one budget shared by several fetches of one request); aborting it is a timeout too. */
  signal?: AbortSignal;
  /** Test-only: allow 127/8 and ::1 (never private or link-local). Default: ALLOW_LOOPBACK_FETCH=1. */
  allowLoopback?: boolean;
  maxRedirects?: number;
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  requireHttps?: boolean;
  /** An extra trusted CA (tests); the system roots stay trusted. */
  ca?: string | Buffer;
  /**
   * Keep the connection for the next fetch to the same checked address (webhook deliveries: the same receivers,
   * again and again, without a TCP and TLS handshake each). The address is still resolved and checked on every
   * fetch; only a connection to that very address is reused. Default: a fresh connection, closed after the fetch.
   */
  reuseConnections?: boolean;
}

export interface SafeFetchResult {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** Media type of the response, lowercased, without parameters ('' when absent). */
  contentType: string;
  finalUrl: string;
  /** The IP address the final response came from. */
  address: string;
}

export type SafeFetchReason =
  | 'invalid_url'
  | 'blocked_address'
  | 'dns_failure'
  | 'too_large'
  | 'timeout'
  | 'too_many_redirects'
  | 'network';

export class SafeFetchError extends Error {
  readonly reason: SafeFetchReason;
  constructor(reason: SafeFetchReason, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SafeFetchError';
    this.reason = reason;
  }
}

const DEFAULT_MAX_REDIRECTS = 3;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
// Headers that must not follow a redirect to another origin.
const CREDENTIAL_HEADERS = ['authorization', 'cookie', 'proxy-authorization'];

// The same spellings as Config.allowLoopbackFetch (1 or true).
const envAllowsLoopback = (): boolean => process.env.ALLOW_LOOPBACK_FETCH === '1' || process.env.ALLOW_LOOPBACK_FETCH === 'true';

// ---------------------------------------------------------------------------------------------------
// Address policy

/** True only for globally routable unicast addresses (loopback too when allowLoopback). */
export function isPublicAddress(ip: string, opts: { allowLoopback?: boolean } = {}): boolean {
  const allowLoopback = opts.allowLoopback ?? false;
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.parse(canonicalIp(ip.replace(/^\[|\]$/g, '')));
  } catch {
    return false;
  }
  return addr.kind() === 'ipv4' ? isPublicV4(addr as ipaddr.IPv4, allowLoopback) : isPublicV6(addr as ipaddr.IPv6, allowLoopback);
}

/**
 * The address in the form the socket layer (inet_pton) reads it, or a throw. Only what node:net accepts as
 * an IP (no decimal, octal or short IPv4 forms, no zone ids). IPv6 goes through the WHATWG serialiser (pure
 * hex) first: ipaddr.js reads '::a.b.c.d' (IPv4-compatible, ::/96) as '::ffff:a.b.c.d' (IPv4-mapped), so
 * '::8.8.8.8' would be judged as 8.8.8.8 while the connection would go to ::808:808.
 */
function canonicalIp(ip: string): string {
  const family = isIP(ip);
  if (family === 4) return ip;
  if (family === 6) return new URL(`http://[${ip}]/`).hostname.slice(1, -1);
  throw new Error('not an IP address');
}

function isPublicV4(addr: ipaddr.IPv4, allowLoopback: boolean): boolean {
  // ipaddr's ranges cover private, loopback, link-local (incl. 169.254.169.254), CGNAT 100.64/10,
  // 0/8, broadcast, multicast and the reserved/test nets; anything else is 'unicast'.
  const range = addr.range();
  return range === 'unicast' || (range === 'loopback' && allowLoopback);
}

const v4From = (hi: number, lo: number): ipaddr.IPv4 => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);

function isPublicV6(addr: ipaddr.IPv6, allowLoopback: boolean): boolean {
  const p = addr.parts;
  switch (addr.range()) {
    case 'unicast':
      // Only 2000::/3 is allocated global unicast; this also refuses IPv4-compatible ::a.b.c.d.
      return (p[0] & 0xe000) === 0x2000;
    case 'loopback':
      return allowLoopback;
    case 'ipv4Mapped': // ::ffff:a.b.c.d
    case 'rfc6145': // ::ffff:0:a.b.c.d
      return isPublicV4(v4From(p[6], p[7]), allowLoopback);
    case 'rfc6052':
      // 64:ff9b::/96 (well-known NAT64) embeds the IPv4 target; 64:ff9b:1::/48 is local-use.
      return p[2] === 0 && p[3] === 0 && p[4] === 0 && p[5] === 0 && isPublicV4(v4From(p[6], p[7]), false);
    case '6to4': // 2002:AABB:CCDD::/48
      return isPublicV4(v4From(p[1], p[2]), false);
    case 'teredo': // 2001:0:server:flags:port:~client
      return isPublicV4(v4From(p[2], p[3]), false) && isPublicV4(v4From(~p[6] & 0xffff, ~p[7] & 0xffff), false);
    default:
      return false; // link-local, unique-local, multicast, unspecified, reserved, documentation, ...
  }
}

// ---------------------------------------------------------------------------------------------------
// Resolution

function parseTarget(raw: string | URL, requireHttps: boolean): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new SafeFetchError('invalid_url', 'Invalid URL');
  }
  const allowed = requireHttps ? ['https:'] : ['http:', 'https:'];
  if (!allowed.includes(url.protocol)) {
    throw new SafeFetchError('invalid_url', `URL scheme must be ${allowed.join(' or ')}`);
  }
  if (!url.hostname) throw new SafeFetchError('invalid_url', 'URL has no host');
  if (url.username || url.password) throw new SafeFetchError('invalid_url', 'URL must not carry credentials');
  return url;
}

/** Rejects with a timeout error when the signal aborts (dns.lookup itself cannot be cancelled). */
function untilAborted<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(timeoutError(signal.reason));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(timeoutError(signal.reason));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

const timeoutError = (cause?: unknown) => new SafeFetchError('timeout', 'Fetch timed out', { cause });

/**
 * Resolves the URL's host (all addresses) and returns the one to connect to. If ANY address is not
 * public the host is refused: a name mixing public and private answers is an attack, not a mistake.
 */
export async function resolvePublicAddress(
  url: URL,
  opts: { allowLoopback?: boolean; signal?: AbortSignal } = {},
): Promise<{ address: string; family: 4 | 6 }> {
  const allowLoopback = opts.allowLoopback ?? envAllowsLoopback();
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const literal = isIP(host);
  if (literal) {
    if (!isPublicAddress(host, { allowLoopback })) throw blocked(host);
    return { address: host, family: literal as 4 | 6 };
  }
  let answers: { address: string; family: number }[];
  try {
    answers = await untilAborted(lookup(host, { all: true, verbatim: true }), opts.signal);
  } catch (e) {
    if (e instanceof SafeFetchError) throw e;
    throw new SafeFetchError('dns_failure', `Could not resolve ${host}`, { cause: e });
  }
  if (answers.length === 0) throw new SafeFetchError('dns_failure', `No address for ${host}`);
  const bad = answers.find((a) => !isPublicAddress(a.address, { allowLoopback }));
  if (bad) throw blocked(bad.address);
  // Prefer IPv4: many hosts have no working IPv6 route.
  const chosen = answers.find((a) => a.family === 4) ?? answers[0];
  return { address: chosen.address, family: chosen.family === 6 ? 6 : 4 };
}

const blocked = (address: string) => new SafeFetchError('blocked_address', `Address ${address} is not allowed`);

// ---------------------------------------------------------------------------------------------------
// Fetching

/** An agent whose every connection goes to `address`, whatever the URL's host name resolves to now. */
export function pinnedAgent(address: string, family: 4 | 6, ca?: string | Buffer): Agent {
  const pinned: LookupFunction = (_hostname, options, callback) => {
    if (options.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  };
  // The URL keeps its host name, so the Host header and the TLS servername stay the original ones.
  return new Agent({
    connect: { lookup: pinned, ...(ca ? { ca: [...rootCertificates, ca.toString()] } : {}) },
  });
}

/** Agents kept by reuseConnections, per checked address (and CA); the oldest is closed beyond the bound. */
const KEPT_AGENTS_MAX = 256;
const keptAgents = new Map<string, Agent>();
function keptAgent(address: string, family: 4 | 6, ca?: string | Buffer): Agent {
  const key = `${family}|${address}|${ca ? createHash('sha256').update(ca).digest('hex') : ''}`;
  let agent = keptAgents.get(key);
  if (agent) {
    keptAgents.delete(key); // most recently used last
    keptAgents.set(key, agent);
    return agent;
  }
  agent = pinnedAgent(address, family, ca);
  keptAgents.set(key, agent);
  if (keptAgents.size > KEPT_AGENTS_MAX) {
    const [oldestKey, oldest] = keptAgents.entries().next().value as [string, Agent];
    keptAgents.delete(oldestKey);
    oldest.close().catch(() => {});
  }
  return agent;
}

interface Hop {
  url: URL;
  method: string;
  headers: Record<string, string>;
  body?: string | Buffer;
}

export async function safeFetch(rawUrl: string, opts: SafeFetchOptions): Promise<SafeFetchResult> {
  const allowLoopback = opts.allowLoopback ?? envAllowsLoopback();
  const maxRedirects = opts.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
  const requireHttps = opts.requireHttps ?? false;
  // One budget for all hops and the body (plus the caller's own deadline, when given).
  const own = AbortSignal.timeout(opts.timeoutMs);
  const signal = opts.signal ? AbortSignal.any([own, opts.signal]) : own;
  let hop: Hop = {
    url: parseTarget(rawUrl, requireHttps),
    method: (opts.method ?? 'GET').toUpperCase(),
    headers: { ...opts.headers },
    body: opts.body,
  };

  for (let redirects = 0; ; redirects++) {
    const { address, family } = await resolvePublicAddress(hop.url, { allowLoopback, signal });
    const agent = opts.reuseConnections ? keptAgent(address, family, opts.ca) : pinnedAgent(address, family, opts.ca);
    try {
      const res = await send(agent, hop, signal);
      const location = headerValue(res.headers.location);
      if (REDIRECT_STATUSES.has(res.statusCode) && location) {
        discard(res);
        if (redirects >= maxRedirects) {
          throw new SafeFetchError('too_many_redirects', `More than ${maxRedirects} redirects`);
        }
        hop = nextHop(hop, res.statusCode, location, requireHttps);
        continue;
      }
      const body = await readBody(res, opts.maxBytes, signal);
      const headers = flattenHeaders(res.headers);
      return {
        status: res.statusCode,
        headers,
        body,
        contentType: (headers['content-type'] ?? '').split(';')[0].trim().toLowerCase(),
        finalUrl: hop.url.href,
        address,
      };
    } finally {
      if (!opts.reuseConnections) agent.destroy().catch(() => {});
    }
  }
}

type Response = Awaited<ReturnType<typeof request>>;

async function send(agent: Agent, hop: Hop, signal: AbortSignal): Promise<Response> {
  try {
    return await request(hop.url, {
      dispatcher: agent,
      method: hop.method as Dispatcher.HttpMethod,
      headers: hop.headers,
      body: hop.body,
      signal,
      maxRedirections: 0,
    });
  } catch (e) {
    throw transportError(e, signal);
  }
}

function transportError(e: unknown, signal: AbortSignal): SafeFetchError {
  if (e instanceof SafeFetchError) return e;
  if (signal.aborted) return timeoutError(e);
  return new SafeFetchError('network', `Fetch failed: ${(e as Error)?.message ?? String(e)}`, { cause: e });
}

async function readBody(res: Response, maxBytes: number, signal: AbortSignal): Promise<Buffer> {
  const declared = Number(headerValue(res.headers['content-length']) ?? NaN);
  if (Number.isFinite(declared) && declared > maxBytes) {
    discard(res);
    throw tooLarge(maxBytes);
  }
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of res.body) {
      total += chunk.length;
      if (total > maxBytes) throw tooLarge(maxBytes); // leaving the loop destroys the stream
      chunks.push(chunk);
    }
  } catch (e) {
    discard(res);
    throw transportError(e, signal);
  }
  return Buffer.concat(chunks, total);
}

/** Drops a response body; undici reports a destroyed unread body as an 'error' event, expected here. */
function discard(res: Response): void {
  res.body.on('error', () => {});
  res.body.destroy();
}

const tooLarge = (maxBytes: number) => new SafeFetchError('too_large', `Response body exceeds ${maxBytes} bytes`);

function nextHop(prev: Hop, status: number, location: string, requireHttps: boolean): Hop {
  let target: URL;
  try {
    target = new URL(location, prev.url);
  } catch {
    throw new SafeFetchError('invalid_url', 'Invalid redirect location');
  }
  const url = parseTarget(target, requireHttps);
  const headers = { ...prev.headers };
  if (url.origin !== prev.url.origin) {
    for (const name of Object.keys(headers)) {
      if (CREDENTIAL_HEADERS.includes(name.toLowerCase())) delete headers[name];
    }
  }
  // As browsers do: 303 always, and 301/302 after a POST, become a GET without a body.
  if (status === 303 || ((status === 301 || status === 302) && prev.method === 'POST')) {
    for (const name of Object.keys(headers)) {
      if (/^content-(type|length|encoding)$/i.test(name)) delete headers[name];
    }
    return { url, method: prev.method === 'HEAD' ? 'HEAD' : 'GET', headers };
  }
  return { url, method: prev.method, headers, body: prev.body };
}

function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

function flattenHeaders(raw: Response['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(raw)) {
    if (value !== undefined) out[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}
