import { connect } from 'node:net';
import { createDb, type Sql } from '@imagegen/platform';
import { type Browser, chromium } from 'playwright-core';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { CHROMIUM } from './mcp-support.js';

/**
 * Issue 15, items 1 and 7: every malformed request is a 4xx in the {error, details} envelope (never a 500,
 * never fastify's own {error, code, message, statusCode}, never echoing the URL), and every HTML page
 * refuses to be framed. One test per row of the table.
 */
let s: TestStack;
let t: TestTenant;
let sql: Sql;
const agent = new Agent({ keepAliveTimeout: 10_000, connections: 8 });

beforeAll(async () => {
  s = await startTestStack({ env: { RATE_LIMIT_DISABLED: '1' } });
  t = await s.createTenant();
  sql = createDb(s.env.DATABASE_URL, { schema: 'library', max: 1 });
}, 120_000);
afterAll(async () => {
  await sql?.end();
  await agent.close();
  await s?.stop();
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  body: any;
}

type Auth = 'tenant' | 'admin' | 'none';

/** One request sent exactly as written (undici does not normalise the path or its escapes). */
async function send(
  method: string,
  path: string,
  opts: { auth?: Auth; body?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  const auth = opts.auth ?? 'tenant';
  if (auth === 'tenant') headers['x-api-key'] = t.liveKey;
  if (auth === 'admin') headers['x-admin-token'] = s.adminToken;
  if (opts.body !== undefined) headers['content-type'] ??= 'application/json';
  const r = await request(`${s.baseUrl}${path}`, { method: method as 'GET', headers, body: opts.body, dispatcher: agent });
  const text = await r.body.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {}
  return { status: r.statusCode, headers: r.headers, text, body };
}

/** The envelope: a 4xx JSON object {error: string, details?: array|object} and nothing of fastify's shape. */
function expectEnvelope(a: Answer, label: string, status?: number): void {
  expect(a.status, `${label}: ${a.text}`).toBeGreaterThanOrEqual(400);
  expect(a.status, `${label}: ${a.text}`).toBeLessThan(500);
  if (status !== undefined) expect(a.status, `${label}: ${a.text}`).toBe(status);
  expect(String(a.headers['content-type']), label).toMatch(/^application\/json/);
  expect(typeof a.body?.error, `${label}: ${a.text}`).toBe('string');
  for (const k of Object.keys(a.body)) expect(['error', 'details', 'code', 'retryAfter'], `${label}: key ${k} in ${a.text}`).toContain(k);
  if (a.body.details !== undefined) expect(typeof a.body.details, label).toBe('object');
  expect(a.text, label).not.toMatch(/FST_ERR|statusCode|\/work\/|node_modules|\bat [\w.<>]+ \(/);
}

const NUL = '\u0000';
const json = (v: unknown) => JSON.stringify(v);

async function countOf(table: string, tenantId: string): Promise<number> {
  const [r] = await sql.unsafe(`SELECT count(*)::int AS n FROM ${table} WHERE tenant_id = $1`, [tenantId]);
  return (r as unknown as { n: number }).n;
}

type Doc = { paths: Record<string, Record<string, { parameters?: { in: string; name: string }[] }>> };

describe('NUL characters and lone surrogates are refused at the edge (400, the field named)', () => {
  it('unauthenticated routes: POST /admin/auth/login, GET /admin/invitations/%00', async () => {
    const login = await send('POST', '/admin/auth/login', { auth: 'none', body: json({ email: NUL, password: 'x' }) });
    expectEnvelope(login, 'login', 400);
    expect(login.body).toEqual({ error: 'Invalid request payload', details: ['email must not contain NUL characters'] });

    const inv = await send('GET', '/admin/invitations/%00', { auth: 'none' });
    expectEnvelope(inv, 'invitation', 400);
    expect(inv.body).toEqual({ error: 'Invalid request payload', details: ['token must not contain NUL characters'] });
    const acc = await send('POST', '/admin/invitations/a%00b/accept', { auth: 'none', body: json({ password: 'long enough password' }) });
    expectEnvelope(acc, 'accept', 400);
  });

  it('body strings, names and nested fields name the field; nothing is stored', async () => {
    const before = await countOf('library.characters', t.tenantId);
    const cases: [string, string, unknown, string][] = [
      [
        'POST',
        '/api/characters',
        { character_name: `Ada${NUL}`, base_prompt: 'a woman in a red coat' },
        'character_name must not contain NUL characters',
      ],
      [
        'POST',
        '/api/characters',
        { character_name: 'Ada', base_prompt: 'a woman in a red coat', tags: ['ok', `x${NUL}`] },
        'tags.1 must not contain NUL characters',
      ],
      ['POST', '/api/style-presets', { name: `x${NUL}`, prompt: 'watercolour' }, 'name must not contain NUL characters'],
      ['POST', '/api/images', { prompt: `a fox${NUL}` }, 'prompt must not contain NUL characters'],
      [
        'POST',
        '/api/scenes',
        { scene_name: 'Beach', scene_prompt: 'sand\ud800' },
        'scene_prompt must not contain unpaired surrogate characters',
      ],
      ['POST', '/api/search-presets', { presetName: `p${NUL}`, filters: {} }, 'presetName must not contain NUL characters'],
      ['POST', '/api/webhooks', { url: `https://example.com/${NUL}`, events: ['quota.warning'] }, 'url must not contain NUL characters'],
      ['POST', '/api/characters', { [`na${NUL}me`]: 'x' }, 'property names in body must not contain NUL characters'],
    ];
    for (const [m, p, b, detail] of cases) {
      const r = await send(m, p, { body: json(b) });
      expectEnvelope(r, `${m} ${p} ${json(b)}`, 400);
      expect(r.body.error).toBe('Invalid request payload');
      expect(r.body.details, `${m} ${p}`).toContain(detail);
    }
    const admin = await send('POST', '/admin/tenants', {
      auth: 'admin',
      body: json({ tenant_id: 'nulltenant', tenant_name: 'N', contact_email: 'n@example.com', provider_credentials: { provA: `k${NUL}` } }),
    });
    expectEnvelope(admin, 'admin tenant', 400);
    expect(admin.body.details).toContain('provider_credentials.provA must not contain NUL characters');
    expect(await countOf('library.characters', t.tenantId)).toBe(before);
  });

  it('every path parameter and query parameter of the OpenAPI document (%00): 400 naming it, never 500', async () => {
    const doc = (await send('GET', '/docs/json', { auth: 'none' })).body as Doc;
    let cases = 0;
    for (const [template, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        const auth: Auth = template.startsWith('/admin') ? 'admin' : 'tenant';
        const params = op.parameters ?? [];
        const fill = (nul?: string) => template.replace(/\{(\w+)\}/g, (_m, n) => (n === nul ? 'a%00b' : '1'));
        const body = method === 'get' || method === 'delete' ? undefined : '{}';
        for (const p of params.filter((x) => x.in === 'path')) {
          const r = await send(method.toUpperCase(), fill(p.name), { auth, body });
          expectEnvelope(r, `${method} ${template} ${p.name}=%00`, 400);
          expect(r.body.details, `${method} ${template}`).toContain(`${p.name} must not contain NUL characters`);
          cases++;
        }
        for (const q of params.filter((x) => x.in === 'query')) {
          const r = await send(method.toUpperCase(), `${fill()}?${q.name}=a%00b`, { auth, body });
          expectEnvelope(r, `${method} ${template}?${q.name}=%00`, 400);
          expect(r.body.details, `${method} ${template}?${q.name}`).toContain(`${q.name} must not contain NUL characters`);
          cases++;
        }
      }
    }
    expect(cases).toBeGreaterThan(60);
  });
});

describe('malformed %-escapes', () => {
  it('in the query of a proxied route (unauthenticated): 400 envelope, not a 500', async () => {
    const paths = [
      '/.well-known/oauth-authorization-server?x=%zz',
      '/.well-known/openid-configuration?a=%',
      '/oauth/authorize?client_id=%E0%A4%A',
      '/oauth/token?x=%ff',
      '/mcp?x=%zz',
      '/?x=%zz',
      '/sse?x=%G0',
    ];
    for (const p of paths) {
      const r = await send(p.startsWith('/oauth/token') || p.startsWith('/mcp') ? 'POST' : 'GET', p, { auth: 'none' });
      expectEnvelope(r, p, 400);
      expect(r.body.error).toBe('Invalid request payload');
    }
  });

  it('in proxied bodies (OAuth registration and token requests, MCP messages): 400 envelope, not a 500', async () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const cases: [string, string, Record<string, string>, string][] = [
      [
        '/oauth/register',
        json({ client_name: `a${NUL}`, redirect_uris: ['http://127.0.0.1/cb'] }),
        {},
        'client_name must not contain NUL characters',
      ],
      [
        '/oauth/register',
        '{"client_name":"\\ud800","redirect_uris":["http://127.0.0.1/cb"]}',
        {},
        'client_name must not contain unpaired surrogate characters',
      ],
      ['/oauth/token', 'grant_type=authorization_code&code=%00&client_id=%00', form, 'code must not contain NUL characters'],
      ['/oauth/token', 'grant_type=authorization_code&code=%zz', form, 'code must be valid percent-encoded UTF-8'],
    ];
    for (const [p, body, headers, detail] of cases) {
      const r = await send('POST', p, { auth: 'none', body, headers });
      expectEnvelope(r, `${p} ${body}`, 400);
      expect(r.body.details, `${p} ${body}`).toContain(detail);
    }
    const mcp = await send('POST', '/mcp', {
      body: json({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_images', arguments: { search: `a${NUL}` } } }),
      headers: { accept: 'application/json, text/event-stream' },
    });
    expectEnvelope(mcp, 'mcp', 400);
    expect(mcp.body.details).toEqual(['params.arguments.search must not contain NUL characters']);
    // Ordinary proxied bodies still pass: a registration succeeds.
    const ok = await send('POST', '/oauth/register', {
      auth: 'none',
      body: json({ client_name: 'fine 🦊', redirect_uris: ['http://127.0.0.1/cb'], token_endpoint_auth_method: 'none' }),
    });
    expect(ok.status, ok.text).toBe(201);
  });

  it('in the query of an API route: 400, the parameter named', async () => {
    const r = await send('GET', '/api/images?search=%zz');
    expectEnvelope(r, 'search=%zz', 400);
    expect(r.body.details).toEqual(['search must be valid percent-encoded UTF-8']);
  });

  it('in any path (every operation with a path parameter): the envelope, without the URL', async () => {
    const doc = (await send('GET', '/docs/json', { auth: 'none' })).body as Doc;
    let n = 0;
    for (const [template, ops] of Object.entries(doc.paths)) {
      if (!template.includes('{')) continue;
      for (const method of Object.keys(ops)) {
        const auth: Auth = template.startsWith('/admin') ? 'admin' : 'tenant';
        for (const bad of ['%zz', '%E0%A4%A', '%ff%fe', '%']) {
          const path = template.replace(/\{(\w+)\}/g, `x${bad}y`);
          const r = await send(method.toUpperCase(), path, { auth });
          expectEnvelope(r, `${method} ${path}`, 400);
          expect(r.text, path).not.toContain(bad);
          n++;
        }
      }
    }
    expect(n).toBeGreaterThan(100);
  });

  it('a path parameter over the length limit: 414 envelope, without the URL', async () => {
    const long = 'a'.repeat(3000);
    for (const p of [`/api/sessions/${long}`, `/api/characters/${long}`, `/admin/invitations/${long}`, `/api/images/${long}`]) {
      const r = await send('GET', p, { auth: p.startsWith('/admin') ? 'none' : 'tenant' });
      expectEnvelope(r, p.slice(0, 40), 414);
      expect(r.text).not.toContain(long);
    }
  });

  it('an unknown route: 404 envelope that does not echo the URL', async () => {
    const r = await send('GET', '/api/nope/%3Cscript%3Ealert(1)%3C%2Fscript%3E', { auth: 'none' });
    expectEnvelope(r, 'not found', 404);
    expect(r.text).not.toMatch(/script|nope/);
  });

  it("Node's own refusal of a malformed request is in the envelope", async () => {
    const raw = await new Promise<string>((resolve, reject) => {
      const url = new URL(s.baseUrl);
      const sock = connect(Number(url.port), url.hostname, () => sock.write('GET /api/images HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n'));
      let out = '';
      sock.on('data', (d) => {
        out += d.toString();
      });
      sock.on('close', () => resolve(out));
      sock.on('error', reject);
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4))).toEqual({ error: 'Bad Request', details: ['malformed HTTP request'] });
  });
});

describe('numbers', () => {
  it('GET /api/images?maxSize=0.5 (fractional bytes): 400', async () => {
    for (const q of ['maxSize=0.5', 'minSize=1.25', 'maxSize=1e400', 'minSize=NaN']) {
      const r = await send('GET', `/api/images?${q}`);
      expectEnvelope(r, q, 400);
      expect(r.body.error).toBe('Invalid request payload');
    }
  });

  it('a search preset with fractional size filters is refused (it could never run)', async () => {
    const r = await send('POST', '/api/search-presets', { body: json({ presetName: 'frac', filters: { maxSize: 0.5 } }) });
    expectEnvelope(r, 'frac', 400);
    expect(r.body.details).toContain('filters.maxSize must be an integer >= 0');
  });
});

describe('search-preset filters', () => {
  it('nested 5,000 deep: 400 with the depth limit named, nothing stored', async () => {
    const before = await countOf('library.search_presets', t.tenantId);
    const deep = `{"presetName":"deep","filters":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}`;
    const r = await send('POST', '/api/search-presets', { body: deep });
    expectEnvelope(r, 'deep', 400);
    expect(r.body).toEqual({
      error: 'Invalid request payload',
      details: [`filters${'.a'.repeat(31)} is nested too deeply (at most 32 levels)`],
    });
    const arrays = await send('POST', '/api/search-presets', {
      body: `{"presetName":"deep","filters":{"search":${'['.repeat(100)}${']'.repeat(100)}}}`,
    });
    expectEnvelope(arrays, 'deep arrays', 400);
    expect(await countOf('library.search_presets', t.tenantId)).toBe(before);
  });

  it('holding a lone surrogate: 400, nothing stored', async () => {
    const before = await countOf('library.search_presets', t.tenantId);
    for (const [body, detail] of [
      ['{"presetName":"s1","filters":{"search":"\\ud800"}}', 'filters.search must not contain unpaired surrogate characters'],
      ['{"presetName":"s2","filters":{"search":"a\\udc00b"}}', 'filters.search must not contain unpaired surrogate characters'],
      ['{"presetName":"s3\\ud800","filters":{}}', 'presetName must not contain unpaired surrogate characters'],
    ]) {
      const r = await send('POST', '/api/search-presets', { body });
      expectEnvelope(r, body as string, 400);
      expect(r.body.details).toEqual([detail]);
    }
    // A well-formed pair (an emoji) is fine.
    const ok = await send('POST', '/api/search-presets', { body: '{"presetName":"emoji","filters":{"search":"\\ud83e\\udd8a"}}' });
    expect(ok.status, ok.text).toBe(200);
    expect(await countOf('library.search_presets', t.tenantId)).toBe(before + 1);
  });
});

describe('HTML pages and the favicon', () => {
  it('/docs (and the OAuth sign-in page) cannot be framed and send a Content-Security-Policy', async () => {
    for (const p of ['/docs', '/docs/', '/docs/static/oauth2-redirect.html']) {
      const r = await send('GET', p, { auth: 'none' });
      expect(r.status, p).toBe(200);
      expect(String(r.headers['content-type']), p).toMatch(/^text\/html/);
      expect(String(r.headers['content-security-policy']), p).toMatch(/frame-ancestors 'none'/);
      expect(r.headers['x-frame-options'], p).toBe('DENY');
    }
    // The sign-in page is served by services/oauth (through the gateway) and already sets both.
    const signIn = await send('GET', '/', { auth: 'none', headers: { accept: 'text/html' } });
    expect(String(signIn.headers['content-type'])).toMatch(/^text\/html/);
    expect(String(signIn.headers['content-security-policy'])).toMatch(/frame-ancestors 'none'/);
    expect(signIn.headers['x-frame-options']).toBe('DENY');
  });

  it('/favicon.ico is a small icon', async () => {
    const r = await request(`${s.baseUrl}/favicon.ico`, { dispatcher: agent });
    const buf = Buffer.from(await r.body.arrayBuffer());
    expect(r.statusCode).toBe(200);
    expect(r.headers['content-type']).toBe('image/x-icon');
    expect([...buf.subarray(0, 4)]).toEqual([0, 0, 1, 0]);
    expect(buf.length).toBeLessThan(4096);
  });

  it('Swagger UI still works under its policy (Chromium: operations rendered, no violation), and not in a frame', async () => {
    let browser: Browser | undefined;
    try {
      browser = await chromium.launch(CHROMIUM);
      const page = await browser.newPage();
      const violations: string[] = [];
      page.on('console', (m) => {
        if (/Content Security Policy|Refused to/i.test(m.text())) violations.push(m.text());
      });
      await page.goto(`${s.baseUrl}/docs`);
      await page.waitForSelector('.opblock', { timeout: 20_000 });
      expect(await page.locator('.opblock').count()).toBeGreaterThan(50);
      expect(violations).toEqual([]);
      // Framed by another page: refused.
      const framed = await browser.newPage();
      await framed.setContent(`<iframe id="f" src="${s.baseUrl}/docs"></iframe>`);
      await framed.waitForTimeout(1500);
      const inner = framed.frames().find((f) => f.url().includes('/docs'));
      const rendered = inner
        ? await inner
            .locator('#swagger-ui')
            .count()
            .catch(() => 0)
        : 0;
      expect(rendered).toBe(0);
    } finally {
      await browser?.close();
    }
  }, 60_000);
});
