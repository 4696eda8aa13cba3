import { rm } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { selfSignedCert } from '../../../test/support/tls.js';
import { isPublicAddress, pinnedAgent, resolvePublicAddress, SafeFetchError, type SafeFetchOptions, safeFetch } from '../src/safe-fetch.js';

// Real local servers; 127.0.0.1 is reachable only with allowLoopback (the test-only switch).
const LOOP: SafeFetchOptions = { maxBytes: 1024, timeoutMs: 3000, allowLoopback: true };

const handler: http.RequestListener = (req, res) => {
  const url = new URL(req.url ?? '/', 'http://x');
  switch (url.pathname) {
    case '/ok':
      res.writeHead(200, { 'content-type': 'Text/Plain; charset=utf-8', 'x-custom': 'yes' });
      res.end('hello');
      return;
    case '/echo': {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            method: req.method,
            host: req.headers.host,
            auth: req.headers.authorization ?? null,
            body: Buffer.concat(chunks).toString(),
          }),
        );
      });
      return;
    }
    case '/not-found':
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('nope');
      return;
    case '/big-declared':
      res.writeHead(200, { 'content-length': '5000', 'content-type': 'image/png' });
      res.end(Buffer.alloc(5000));
      return;
    case '/big-stream': {
      // Chunked, no content-length, and never ends on its own: only the size cap can stop it.
      res.writeHead(200, { 'content-type': 'image/png' });
      const timer = setInterval(() => res.write(Buffer.alloc(512)), 5);
      res.on('close', () => clearInterval(timer));
      return;
    }
    case '/hang':
      return; // never answers
    case '/redirect':
      res.writeHead(302, { location: url.searchParams.get('to') ?? '/ok' });
      res.end();
      return;
    case '/loop':
      res.writeHead(302, { location: `/loop?n=${Number(url.searchParams.get('n') ?? 0) + 1}` });
      res.end();
      return;
    default:
      res.writeHead(500);
      res.end();
  }
};

let server: http.Server;
let base: string;
let port: number;

beforeAll(async () => {
  delete process.env.ALLOW_LOOPBACK_FETCH;
  server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

async function reason(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SafeFetchError);
  return (err as SafeFetchError).reason;
}

describe('safeFetch against a local server', () => {
  it('returns body, status, headers and content type', async () => {
    const res = await safeFetch(`${base}/ok`, LOOP);
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('hello');
    expect(res.contentType).toBe('text/plain');
    expect(res.headers['content-type']).toBe('Text/Plain; charset=utf-8');
    expect(res.headers['x-custom']).toBe('yes');
    expect(res.finalUrl).toBe(`${base}/ok`);
    expect(res.address).toBe('127.0.0.1');
  });

  it('connects to the checked address while keeping the Host header', async () => {
    const res = await safeFetch(`http://localhost:${port}/echo`, LOOP);
    expect(res.address).toBe('127.0.0.1');
    expect(JSON.parse(res.body.toString()).host).toBe(`localhost:${port}`);
  });

  it('pins connections to the checked address whatever the name resolves to (DNS rebinding)', async () => {
    const agent = pinnedAgent('127.0.0.1', 4);
    try {
      // .invalid never resolves: reaching the server proves no second lookup happened.
      const res = await request(`http://rebind.invalid:${port}/echo`, { dispatcher: agent });
      expect(JSON.parse(await res.body.text()).host).toBe(`rebind.invalid:${port}`);
    } finally {
      await agent.close();
    }
  });

  it('sends method, headers and body', async () => {
    const res = await safeFetch(`${base}/echo`, { ...LOOP, method: 'POST', headers: { authorization: 'Bearer t' }, body: '{"a":1}' });
    expect(JSON.parse(res.body.toString())).toMatchObject({ method: 'POST', auth: 'Bearer t', body: '{"a":1}' });
  });

  it('returns non-2xx responses instead of throwing', async () => {
    const res = await safeFetch(`${base}/not-found`, LOOP);
    expect(res.status).toBe(404);
    expect(res.body.toString()).toBe('nope');
  });

  it('refuses a body whose content-length exceeds maxBytes', async () => {
    expect(await reason(safeFetch(`${base}/big-declared`, LOOP))).toBe('too_large');
  });

  it('aborts a streamed body as soon as it exceeds maxBytes', async () => {
    const started = Date.now();
    expect(await reason(safeFetch(`${base}/big-stream`, LOOP))).toBe('too_large');
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('times out on a server that never answers', async () => {
    const started = Date.now();
    expect(await reason(safeFetch(`${base}/hang`, { ...LOOP, timeoutMs: 300 }))).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('follows redirects and reports the final URL', async () => {
    const res = await safeFetch(`${base}/redirect?to=/ok`, LOOP);
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('hello');
    expect(res.finalUrl).toBe(`${base}/ok`);
  });

  it('turns a 302 after POST into a GET and drops credentials across origins', async () => {
    const res = await safeFetch(`${base}/redirect?to=${encodeURIComponent(`http://localhost:${port}/echo`)}`, {
      ...LOOP,
      method: 'POST',
      headers: { authorization: 'Bearer t' },
      body: 'payload',
    });
    expect(JSON.parse(res.body.toString())).toMatchObject({ method: 'GET', auth: null, body: '' });
  });

  it('refuses redirects to the metadata service and to private addresses', async () => {
    for (const to of ['http://169.254.169.254/latest/meta-data/', 'http://10.0.0.1/', 'http://[::ffff:10.0.0.1]/']) {
      expect(await reason(safeFetch(`${base}/redirect?to=${encodeURIComponent(to)}`, LOOP))).toBe('blocked_address');
    }
  });

  it('refuses redirects to other schemes', async () => {
    expect(await reason(safeFetch(`${base}/redirect?to=${encodeURIComponent('file:///etc/passwd')}`, LOOP))).toBe('invalid_url');
  });

  it('stops after maxRedirects', async () => {
    expect(await reason(safeFetch(`${base}/loop`, LOOP))).toBe('too_many_redirects');
    expect(await reason(safeFetch(`${base}/redirect?to=/ok`, { ...LOOP, maxRedirects: 0 }))).toBe('too_many_redirects');
  });

  it('refuses loopback without allowLoopback', async () => {
    const opts = { maxBytes: 1024, timeoutMs: 3000 };
    expect(await reason(safeFetch(`${base}/ok`, opts))).toBe('blocked_address');
    expect(await reason(safeFetch(`http://localhost:${port}/ok`, opts))).toBe('blocked_address');
    expect(await reason(safeFetch(`http://[::1]:${port}/ok`, opts))).toBe('blocked_address');
    expect(await reason(safeFetch(`${base}/ok`, { ...opts, allowLoopback: false }))).toBe('blocked_address');
  });

  it('takes allowLoopback from ALLOW_LOOPBACK_FETCH=1 by default', async () => {
    process.env.ALLOW_LOOPBACK_FETCH = '1';
    try {
      expect((await safeFetch(`${base}/ok`, { maxBytes: 1024, timeoutMs: 3000 })).status).toBe(200);
      // Still loopback only.
      expect(await reason(safeFetch('http://10.1.2.3/', { maxBytes: 1024, timeoutMs: 3000 }))).toBe('blocked_address');
    } finally {
      delete process.env.ALLOW_LOOPBACK_FETCH;
    }
  });

  it('refuses invalid URLs and schemes', async () => {
    for (const url of ['not a url', 'ftp://example.com/x', 'file:///etc/passwd', `http://user:pw@127.0.0.1:${port}/ok`]) {
      expect(await reason(safeFetch(url, LOOP))).toBe('invalid_url');
    }
    expect(await reason(safeFetch(`${base}/ok`, { ...LOOP, requireHttps: true }))).toBe('invalid_url');
  });

  it('reports names that do not resolve', async () => {
    expect(await reason(safeFetch('http://no-such-host.invalid/', LOOP))).toBe('dns_failure');
  });

  it('reports connection failures as network errors', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    expect(await reason(safeFetch(`http://127.0.0.1:${closedPort}/`, LOOP))).toBe('network');
  });
});

describe('safeFetch over https with a self-signed certificate', () => {
  let dir: string;
  let tlsServer: https.Server;
  let ca: Buffer;
  let tlsPort: number;

  beforeAll(async () => {
    const tls = selfSignedCert('safe-fetch-tls-');
    dir = tls.dir;
    ca = tls.cert;
    tlsServer = https.createServer({ key: tls.key, cert: ca }, handler);
    await new Promise<void>((resolve) => tlsServer.listen(0, '127.0.0.1', resolve));
    tlsPort = (tlsServer.address() as AddressInfo).port;
  });

  afterAll(async () => {
    tlsServer.closeAllConnections();
    await new Promise((resolve) => tlsServer.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });

  it('fetches by host name with the extra CA (servername kept while pinned)', async () => {
    const res = await safeFetch(`https://localhost:${tlsPort}/ok`, { ...LOOP, ca, requireHttps: true });
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('hello');
    expect(res.address).toBe('127.0.0.1');
  });

  it('fetches by IP literal with the extra CA', async () => {
    const res = await safeFetch(`https://127.0.0.1:${tlsPort}/ok`, { ...LOOP, ca });
    expect(res.body.toString()).toBe('hello');
  });

  it('refuses the self-signed certificate without the CA', async () => {
    expect(await reason(safeFetch(`https://localhost:${tlsPort}/ok`, LOOP))).toBe('network');
  });

  it('reuseConnections: fetches to one checked address share one TLS connection; without it each has its own', async () => {
    const sockets = new Set<unknown>();
    const count = (_req: http.IncomingMessage, res: http.ServerResponse) => sockets.add(res.socket);
    tlsServer.on('request', count);
    try {
      for (let i = 0; i < 3; i++)
        expect((await safeFetch(`https://localhost:${tlsPort}/ok`, { ...LOOP, ca, reuseConnections: true })).status).toBe(200);
      expect(sockets.size).toBe(1);
      sockets.clear();
      for (let i = 0; i < 3; i++) expect((await safeFetch(`https://localhost:${tlsPort}/ok`, { ...LOOP, ca })).status).toBe(200);
      expect(sockets.size).toBe(3);
      // The address is still checked on every fetch: loopback refused without the test switch, reused agent or not.
      expect(
        await reason(safeFetch(`https://localhost:${tlsPort}/ok`, { ...LOOP, ca, reuseConnections: true, allowLoopback: false })),
      ).toBe('blocked_address');
    } finally {
      tlsServer.off('request', count);
    }
  });
});

describe('isPublicAddress', () => {
  it.each([
    ['10.1.2.3', false],
    ['172.16.0.1', false],
    ['172.31.255.255', false],
    ['192.168.1.1', false],
    ['127.0.0.1', false],
    ['169.254.169.254', false],
    ['100.64.0.1', false],
    ['0.0.0.0', false],
    ['0.1.2.3', false],
    ['255.255.255.255', false],
    ['224.0.0.1', false],
    ['192.0.2.1', false],
    ['::', false],
    ['::1', false],
    ['fe80::1', false],
    ['fc00::1', false],
    ['fd12:3456::1', false],
    ['ff02::1', false],
    ['::ffff:10.0.0.1', false],
    ['::ffff:127.0.0.1', false],
    ['::ffff:169.254.169.254', false],
    ['::127.0.0.1', false],
    ['64:ff9b::10.0.0.1', false],
    ['64:ff9b:1::1', false],
    ['2002:0a00:0001::1', false],
    ['2001:0:4136:e378:8000:63bf:f5ff:fffe', false], // teredo, client ~0xf5fffffe = 10.0.0.1
    ['2001:db8::1', false],
    ['not an ip', false],
    // IPv4-compatible ::/96 (deprecated, never public): ipaddr.js alone reads '::8.8.8.8' as ::ffff:8.8.8.8.
    ['::8.8.8.8', false],
    ['::808:808', false],
    ['[::8.8.8.8]', false],
    // Only what the socket layer reads as an address: no decimal, octal, hex or short IPv4 forms, no zones.
    ['134744072', false],
    ['0x8.0x8.0x8.0x8', false],
    ['8.8.2056', false],
    ['2606:4700::1111%eth0', false],
    ['8.8.8.8', true],
    ['1.1.1.1', true],
    ['172.32.0.1', true],
    ['2606:4700::1111', true],
    ['::ffff:8.8.8.8', true],
    ['64:ff9b::8.8.8.8', true],
    ['2002:0808:0808::1', true],
  ])('%s -> %s', (ip, expected) => {
    expect(isPublicAddress(ip)).toBe(expected);
  });

  it('allows loopback only when asked, and never private or link-local', () => {
    for (const ip of ['127.0.0.1', '127.5.5.5', '::1', '::ffff:127.0.0.1']) {
      expect(isPublicAddress(ip, { allowLoopback: true })).toBe(true);
    }
    for (const ip of ['10.0.0.1', '169.254.169.254', 'fe80::1', '::ffff:10.0.0.1', '0.0.0.0', '::127.0.0.1', '::7f00:1']) {
      expect(isPublicAddress(ip, { allowLoopback: true })).toBe(false);
    }
  });
});

describe('resolvePublicAddress', () => {
  it('checks IP literals directly', async () => {
    expect(await resolvePublicAddress(new URL('http://8.8.8.8/'))).toEqual({ address: '8.8.8.8', family: 4 });
    expect(await resolvePublicAddress(new URL('http://[2606:4700::1111]/'))).toEqual({ address: '2606:4700::1111', family: 6 });
    expect(await reason(resolvePublicAddress(new URL('http://169.254.169.254/')))).toBe('blocked_address');
    // WHATWG URL parsing normalises numeric hosts first: 2130706433 is 127.0.0.1.
    expect(await reason(resolvePublicAddress(new URL('http://2130706433/')))).toBe('blocked_address');
  });

  it('resolves names and refuses when an answer is not public', async () => {
    expect(await reason(resolvePublicAddress(new URL('http://localhost/')))).toBe('blocked_address');
    expect(await resolvePublicAddress(new URL('http://localhost/'), { allowLoopback: true })).toMatchObject({
      address: '127.0.0.1',
      family: 4,
    });
  });
});
