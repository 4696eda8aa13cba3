import { ALL_SCOPES } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CookieJar, keyFor, type OAuthHarness, pkce, startOAuth } from './helpers.js';

let h: OAuthHarness;
let liveKey: string;
const REDIRECT = 'http://127.0.0.1:53682/callback';

beforeAll(async () => {
  h = await startOAuth();
  liveKey = h.addTenant('acme');
});
afterAll(async () => {
  await h?.stop();
});

async function register(body: Record<string, unknown> = {}) {
  const res = await fetch(`${h.base}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'Test client', redirect_uris: [REDIRECT], ...body }),
  });
  return { status: res.status, body: (await res.json()) as any };
}

function authorizeUrl(clientId: string, p: Record<string, string | undefined>) {
  const u = new URL(`${h.base}/oauth/authorize`);
  const params: Record<string, string | undefined> = {
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT,
    state: 'st-1',
    ...p,
  };
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.set(k, v);
  return u.toString();
}

/** Drives authorize -> sign-in page -> approve -> redirect with code, like a browser. */
async function browserAuthorize(
  clientId: string,
  opts: { scope?: string; key?: string; challenge: string; decision?: string; uncheck?: string[]; jar?: CookieJar },
) {
  const jar = opts.jar ?? new CookieJar();
  const html = { accept: 'text/html,application/xhtml+xml' };
  let res = await jar.fetch(authorizeUrl(clientId, { scope: opts.scope, code_challenge: opts.challenge, code_challenge_method: 'S256' }), {
    headers: html,
  });
  if (res.status === 303 && res.headers.get('location')?.startsWith(REDIRECT)) return { jar, location: res.headers.get('location')! };
  expect(res.status).toBe(303);
  const loginUrl = res.headers.get('location')!;
  expect(loginUrl.startsWith(`${h.base}/?return_to=`)).toBe(true);
  res = await jar.fetch(loginUrl, { headers: html });
  expect(res.status).toBe(200);
  const page = await res.text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(page)![1];
  const scopes = [...page.matchAll(/name="scope" value="([^"]+)"/g)].map((m) => m[1]).filter((s) => !opts.uncheck?.includes(s));
  const form = new URLSearchParams({ csrf, api_key: opts.key ?? liveKey, decision: opts.decision ?? 'approve' });
  for (const s of scopes) form.append('scope', s);
  res = await jar.fetch(`${h.base}/oauth/signin`, {
    method: 'POST',
    headers: { ...html, 'content-type': 'application/x-www-form-urlencoded', origin: h.base },
    body: form.toString(),
  });
  if (res.status !== 303) return { jar, status: res.status, page: await res.text() };
  const resume = res.headers.get('location')!;
  res = await jar.fetch(resume, { headers: html });
  expect(res.status, `${resume} ${await res.clone().text()}`).toBe(303);
  return { jar, location: res.headers.get('location')! };
}

async function token(form: Record<string, string>) {
  const res = await fetch(`${h.base}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });
  return { status: res.status, body: (await res.json()) as any, headers: res.headers };
}

async function introspect(tokenValue: string) {
  const res = await fetch(`${h.base}/_internal/introspect`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token: tokenValue }),
  });
  return (await res.json()) as any;
}

describe('metadata', () => {
  it('serves protected resource metadata (RFC 9728)', async () => {
    for (const p of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      const res = await fetch(`${h.base}${p}`);
      expect(res.status).toBe(200);
      const body = (await res.json()) as any;
      // RFC 9728 §3.3: exactly the resource identifier the location was derived from (issue 15).
      expect(body.resource).toBe(`${h.base}${p.slice('/.well-known/oauth-protected-resource'.length)}`);
      expect(body.authorization_servers).toEqual([`${h.base}/oauth`]);
      expect(body.scopes_supported).toEqual(ALL_SCOPES);
    }
  });

  it('serves the discovery document at every well-known location', async () => {
    for (const p of [
      '/oauth/.well-known/openid-configuration',
      '/.well-known/oauth-authorization-server',
      '/.well-known/oauth-authorization-server/oauth',
      '/.well-known/openid-configuration/oauth',
    ]) {
      const res = await fetch(`${h.base}${p}`);
      expect(res.status, p).toBe(200);
      const d = (await res.json()) as any;
      expect(d.issuer).toBe(`${h.base}/oauth`);
      expect(d.authorization_endpoint).toBe(`${h.base}/oauth/authorize`);
      expect(d.token_endpoint).toBe(`${h.base}/oauth/token`);
      expect(d.registration_endpoint).toBe(`${h.base}/oauth/register`);
      expect(d.code_challenge_methods_supported).toEqual(['S256']);
      expect(d.response_types_supported).toEqual(['code']);
      expect(d.grant_types_supported).toEqual(expect.arrayContaining(['authorization_code', 'refresh_token']));
      for (const s of ALL_SCOPES) expect(d.scopes_supported).toContain(s);
    }
  });
});

describe('registration', () => {
  it('registers a public client and documents the response', async () => {
    const r = await register({ scope: 'images:read images:generate' });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      client_name: 'Test client',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      scope: 'images:read images:generate',
    });
    expect(typeof r.body.client_id).toBe('string');
    expect(typeof r.body.client_id_issued_at).toBe('number');
    expect(r.body.client_secret).toBeUndefined();
  });

  it('refuses bad metadata', async () => {
    expect((await register({ redirect_uris: [] })).body.error).toBe('invalid_redirect_uri');
    expect((await register({ redirect_uris: ['not a url'] })).body.error).toBe('invalid_redirect_uri');
    const bad = await register({ scope: 'images:read admin:everything' });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('invalid_scope');
  });
});

describe('authorization code flow', () => {
  it('asks non-HTML clients to log in with 401 JSON and HTML clients with a redirect', async () => {
    const { body: client } = await register();
    const { challenge } = pkce();
    const url = authorizeUrl(client.client_id, { code_challenge: challenge, code_challenge_method: 'S256', scope: 'images:read' });
    const json = await fetch(url, { headers: { accept: 'application/json' }, redirect: 'manual' });
    expect(json.status).toBe(401);
    const body = (await json.json()) as any;
    expect(body.error).toBe('login_required');
    expect(body.login_required).toBe(true);
    expect(body.login_url.startsWith(`${h.base}/?return_to=`)).toBe(true);
    const returnTo = new URL(body.login_url).searchParams.get('return_to')!;
    expect(returnTo.startsWith(`${h.base}/oauth/authorize?`)).toBe(true);
    expect(new URL(returnTo).searchParams.get('state')).toBe('st-1');

    // The login_url opened in a browser restarts the authorization and lands on the form.
    const jar = new CookieJar();
    const restart = await jar.fetch(body.login_url, { headers: { accept: 'text/html' } });
    expect(restart.status).toBe(302);
    expect(restart.headers.get('location')).toBe(returnTo);
    const again = await jar.fetch(returnTo, { headers: { accept: 'text/html' } });
    expect(again.status).toBe(303);
    const form = await jar.fetch(again.headers.get('location')!, { headers: { accept: 'text/html' } });
    expect(form.status).toBe(200);
    const page = await form.text();
    expect(page).toContain('Test client');
    expect(page).toContain('images:read');
    expect(page).not.toContain(liveKey);
    expect(form.headers.get('x-frame-options')).toBe('DENY');
    expect(form.headers.get('cache-control')).toBe('no-store');
  });

  it('shows an explanation without a pending authorization', async () => {
    const res = await fetch(`${h.base}/`);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('imagegen sign-in');
    const evil = await fetch(`${h.base}/?return_to=${encodeURIComponent('https://evil.example/x')}`, { redirect: 'manual' });
    expect(evil.status).toBe(200);
  });

  it('issues, refreshes with rotation and revokes the family on reuse', async () => {
    const { body: client } = await register();
    const { verifier, challenge } = pkce();
    const r = await browserAuthorize(client.client_id, { scope: 'images:read images:generate', challenge });
    const cb = new URL(r.location!);
    expect(cb.origin + cb.pathname).toBe(REDIRECT);
    expect(cb.searchParams.get('state')).toBe('st-1');
    expect(cb.searchParams.get('iss')).toBe(`${h.base}/oauth`);
    const code = cb.searchParams.get('code')!;

    const t = await token({
      grant_type: 'authorization_code',
      code,
      code_verifier: verifier,
      client_id: client.client_id,
      redirect_uri: REDIRECT,
    });
    expect(t.status).toBe(200);
    expect(t.body).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'images:read images:generate' });
    expect(typeof t.body.access_token).toBe('string');
    expect(typeof t.body.refresh_token).toBe('string');

    const info = await introspect(t.body.access_token);
    expect(info).toMatchObject({
      active: true,
      tenant_id: 'acme',
      tenant_active: true,
      scope: 'images:read images:generate',
      client_id: client.client_id,
    });

    const r1 = await token({ grant_type: 'refresh_token', refresh_token: t.body.refresh_token, client_id: client.client_id });
    expect(r1.status).toBe(200);
    expect(r1.body.refresh_token).not.toBe(t.body.refresh_token);
    expect(r1.body.scope).toBe('images:read images:generate');
    expect((await introspect(r1.body.access_token)).active).toBe(true);

    // reuse of the rotated token: refused, and the whole family is revoked
    const reuse = await token({ grant_type: 'refresh_token', refresh_token: t.body.refresh_token, client_id: client.client_id });
    expect(reuse.status).toBe(400);
    expect(reuse.body.error).toBe('invalid_grant');
    const newer = await token({ grant_type: 'refresh_token', refresh_token: r1.body.refresh_token, client_id: client.client_id });
    expect(newer.status).toBe(400);
    expect(newer.body.error).toBe('invalid_grant');
    expect((await introspect(r1.body.access_token)).active).toBe(false);
    expect((await introspect(t.body.access_token)).active).toBe(false);
  });

  it('a code is single use: a second exchange is refused and revokes what the first issued', async () => {
    const { body: client } = await register();
    const { verifier, challenge } = pkce();
    const r = await browserAuthorize(client.client_id, { scope: 'images:read', challenge });
    const code = new URL(r.location!).searchParams.get('code')!;
    const form = { grant_type: 'authorization_code', code, code_verifier: verifier, client_id: client.client_id, redirect_uri: REDIRECT };
    const t = await token(form);
    expect(t.status).toBe(200);
    const again = await token(form);
    expect(again.status).toBe(400);
    expect(again.body.error).toBe('invalid_grant');
    expect((await introspect(t.body.access_token)).active).toBe(false);
  });

  it('grants only the scopes the tenant approved', async () => {
    const { body: client } = await register();
    const { verifier, challenge } = pkce();
    const r = await browserAuthorize(client.client_id, {
      scope: 'images:read images:delete analytics:read',
      challenge,
      uncheck: ['images:delete'],
    });
    const code = new URL(r.location!).searchParams.get('code')!;
    const t = await token({
      grant_type: 'authorization_code',
      code,
      code_verifier: verifier,
      client_id: client.client_id,
      redirect_uri: REDIRECT,
    });
    expect(t.status).toBe(200);
    expect(t.body.scope.split(' ').sort()).toEqual(['analytics:read', 'images:read']);
  });

  it('defaults to the registered scope, else all scopes', async () => {
    const { body: client } = await register({ scope: 'sessions:read' });
    const p1 = pkce();
    const r1 = await browserAuthorize(client.client_id, { challenge: p1.challenge });
    const t1 = await token({
      grant_type: 'authorization_code',
      code: new URL(r1.location!).searchParams.get('code')!,
      code_verifier: p1.verifier,
      client_id: client.client_id,
      redirect_uri: REDIRECT,
    });
    expect(t1.body.scope).toBe('sessions:read');

    const { body: open } = await register();
    const p2 = pkce();
    const r2 = await browserAuthorize(open.client_id, { challenge: p2.challenge });
    const t2 = await token({
      grant_type: 'authorization_code',
      code: new URL(r2.location!).searchParams.get('code')!,
      code_verifier: p2.verifier,
      client_id: open.client_id,
      redirect_uri: REDIRECT,
    });
    expect(t2.body.scope.split(' ').sort()).toEqual([...ALL_SCOPES].sort());
  });

  it('re-renders the form for a wrong key and an inactive tenant; deny returns access_denied', async () => {
    const { body: client } = await register();
    const { challenge } = pkce();
    const bad = await browserAuthorize(client.client_id, { scope: 'images:read', challenge, key: keyFor() });
    expect(bad.status).toBe(401);
    expect(bad.page).toContain('Invalid or missing API key');
    const malformed = await browserAuthorize(client.client_id, { scope: 'images:read', challenge, key: 'nope' });
    expect(malformed.status).toBe(401);
    const inactiveKey = h.addTenant('sleepy', false);
    const inactive = await browserAuthorize(client.client_id, { scope: 'images:read', challenge, key: inactiveKey });
    expect(inactive.status).toBe(403);
    expect(inactive.page).toContain('Tenant account is inactive');
    const denied = await browserAuthorize(client.client_id, { scope: 'images:read', challenge, decision: 'deny' });
    const cb = new URL(denied.location!);
    expect(cb.searchParams.get('error')).toBe('access_denied');
    expect(cb.searchParams.get('state')).toBe('st-1');
  });

  it('refuses a forged sign-in form (CSRF)', async () => {
    const { body: client } = await register();
    const { challenge } = pkce();
    const jar = new CookieJar();
    const res = await jar.fetch(
      authorizeUrl(client.client_id, { code_challenge: challenge, code_challenge_method: 'S256', scope: 'images:read' }),
      {
        headers: { accept: 'text/html' },
      },
    );
    await jar.fetch(res.headers.get('location')!, { headers: { accept: 'text/html' } });
    const forged = await jar.fetch(`${h.base}/oauth/signin`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example' },
      body: new URLSearchParams({ csrf: 'x', api_key: liveKey, decision: 'approve', scope: 'images:read' }).toString(),
    });
    expect(forged.status).toBe(403);
    const noCookie = await fetch(`${h.base}/oauth/signin`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf: 'x', api_key: liveKey, decision: 'approve' }).toString(),
    });
    expect(noCookie.status).toBe(400);
  });

  it('reuses the browser session for a second client (key optional) and switches tenants with another key', async () => {
    const { body: c1 } = await register();
    const p1 = pkce();
    const first = await browserAuthorize(c1.client_id, { scope: 'images:read', challenge: p1.challenge });
    expect(first.location).toContain('code=');
    const { body: c2 } = await register();
    const p2 = pkce();
    const second = await browserAuthorize(c2.client_id, { scope: 'images:read', challenge: p2.challenge, key: '', jar: first.jar });
    const t2 = await token({
      grant_type: 'authorization_code',
      code: new URL(second.location!).searchParams.get('code')!,
      code_verifier: p2.verifier,
      client_id: c2.client_id,
      redirect_uri: REDIRECT,
    });
    expect((await introspect(t2.body.access_token)).tenant_id).toBe('acme');

    const otherKey = h.addTenant('other');
    const { body: c3 } = await register();
    const p3 = pkce();
    const third = await browserAuthorize(c3.client_id, { scope: 'images:read', challenge: p3.challenge, key: otherKey, jar: first.jar });
    const t3 = await token({
      grant_type: 'authorization_code',
      code: new URL(third.location!).searchParams.get('code')!,
      code_verifier: p3.verifier,
      client_id: c3.client_id,
      redirect_uri: REDIRECT,
    });
    expect((await introspect(t3.body.access_token)).tenant_id).toBe('other');
  });
});

describe('errors', () => {
  it('refuses plain PKCE, missing PKCE and unsupported response types at authorize', async () => {
    const { body: client } = await register();
    const plain = await fetch(authorizeUrl(client.client_id, { code_challenge: 'a'.repeat(43), code_challenge_method: 'plain' }), {
      redirect: 'manual',
    });
    expect(plain.status).toBe(303);
    const loc = new URL(plain.headers.get('location')!);
    expect(loc.searchParams.get('error')).toBe('invalid_request');
    expect(loc.searchParams.get('error_description')).toMatch(/code_challenge_method/);

    const missing = await fetch(authorizeUrl(client.client_id, {}), { redirect: 'manual' });
    expect(new URL(missing.headers.get('location')!).searchParams.get('error')).toBe('invalid_request');

    const token = await fetch(
      authorizeUrl(client.client_id, { response_type: 'token', code_challenge: pkce().challenge, code_challenge_method: 'S256' }),
      {
        redirect: 'manual',
      },
    );
    // implicit-style response types answer in the fragment
    const frag = new URLSearchParams(new URL(token.headers.get('location')!).hash.slice(1));
    expect(frag.get('error')).toBe('unsupported_response_type');
  });

  it('refuses an unregistered redirect_uri and unknown clients without redirecting', async () => {
    const { body: client } = await register();
    const res = await fetch(
      authorizeUrl(client.client_id, {
        redirect_uri: 'http://127.0.0.1:1/evil',
        code_challenge: pkce().challenge,
        code_challenge_method: 'S256',
      }),
      { headers: { accept: 'application/json' }, redirect: 'manual' },
    );
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error).toBe('invalid_request');
    const html = await fetch(
      authorizeUrl(client.client_id, {
        redirect_uri: 'http://127.0.0.1:1/evil',
        code_challenge: pkce().challenge,
        code_challenge_method: 'S256',
      }),
      { headers: { accept: 'text/html' }, redirect: 'manual' },
    );
    expect(html.status).toBe(400);
    expect(await html.text()).toContain('invalid_request');
    const unknown = await fetch(authorizeUrl('nope', { code_challenge: pkce().challenge, code_challenge_method: 'S256' }), {
      headers: { accept: 'application/json' },
      redirect: 'manual',
    });
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as any).error).toBe('invalid_client');
  });

  it('requires redirect_uri even when the client registered only one (SPEC 4.10: redirect_uri required)', async () => {
    const { body: client } = await register();
    expect(client.redirect_uris).toEqual([REDIRECT]);
    const res = await fetch(
      authorizeUrl(client.client_id, { redirect_uri: undefined, code_challenge: pkce().challenge, code_challenge_method: 'S256' }),
      { headers: { accept: 'application/json' }, redirect: 'manual' },
    );
    expect(res.status).toBe(400);
    expect(res.headers.get('location')).toBeNull();
    expect(((await res.json()) as any).error).toBe('invalid_request');
    // and at the token endpoint (authorization_code grant: code, code_verifier, client_id, redirect_uri)
    const { verifier, challenge } = pkce();
    const r = await browserAuthorize(client.client_id, { scope: 'images:read', challenge });
    const code = new URL(r.location!).searchParams.get('code')!;
    const missing = await token({ grant_type: 'authorization_code', code, code_verifier: verifier, client_id: client.client_id });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toBe('invalid_request');
  });

  it('refuses scopes outside the registered ones with invalid_scope', async () => {
    const { body: client } = await register({ scope: 'images:read' });
    const res = await fetch(
      authorizeUrl(client.client_id, { scope: 'images:delete', code_challenge: pkce().challenge, code_challenge_method: 'S256' }),
      {
        redirect: 'manual',
      },
    );
    expect(new URL(res.headers.get('location')!).searchParams.get('error')).toBe('invalid_scope');
  });

  it('refuses unknown scopes with invalid_scope (SPEC 5: scope values are the twelve scopes)', async () => {
    const { body: client } = await register();
    for (const scope of ['images:read images:write', 'admin']) {
      const res = await fetch(authorizeUrl(client.client_id, { scope, code_challenge: pkce().challenge, code_challenge_method: 'S256' }), {
        redirect: 'manual',
      });
      expect(res.status, scope).toBe(303);
      const loc = new URL(res.headers.get('location')!);
      expect(`${loc.origin}${loc.pathname}`).toBe(REDIRECT);
      expect(loc.searchParams.get('error'), scope).toBe('invalid_scope');
      expect(loc.searchParams.get('state')).toBe('st-1');
    }
    // known scopes (and the OIDC ones) still pass to the sign-in step
    const ok = await fetch(
      authorizeUrl(client.client_id, { scope: 'openid images:read', code_challenge: pkce().challenge, code_challenge_method: 'S256' }),
      { headers: { accept: 'application/json' }, redirect: 'manual' },
    );
    expect(ok.status).toBe(401);
    expect(((await ok.json()) as any).error).toBe('login_required');
  });

  it('refuses a wrong verifier, a wrong redirect_uri, bad grant types and unknown clients at the token endpoint', async () => {
    const { body: client } = await register();
    const { challenge } = pkce();
    const r = await browserAuthorize(client.client_id, { scope: 'images:read', challenge });
    const code = new URL(r.location!).searchParams.get('code')!;
    const wrongVerifier = await token({
      grant_type: 'authorization_code',
      code,
      code_verifier: pkce().verifier,
      client_id: client.client_id,
      redirect_uri: REDIRECT,
    });
    expect(wrongVerifier.status).toBe(400);
    expect(wrongVerifier.body.error).toBe('invalid_grant');

    const p2 = pkce();
    const r2 = await browserAuthorize(client.client_id, { scope: 'images:read', challenge: p2.challenge, jar: r.jar });
    const code2 = new URL(r2.location!).searchParams.get('code')!;
    const wrongRedirect = await token({
      grant_type: 'authorization_code',
      code: code2,
      code_verifier: p2.verifier,
      client_id: client.client_id,
      redirect_uri: 'http://127.0.0.1:53682/other',
    });
    expect(wrongRedirect.status).toBe(400);
    expect(wrongRedirect.body.error).toBe('invalid_grant');

    const noCode = await token({ grant_type: 'authorization_code', client_id: client.client_id, redirect_uri: REDIRECT });
    expect(noCode.body.error).toBe('invalid_request');

    const badGrant = await token({ grant_type: 'password', client_id: client.client_id });
    expect(badGrant.status).toBe(400);
    expect(badGrant.body.error).toBe('unsupported_grant_type');

    const unknownClient = await token({ grant_type: 'refresh_token', refresh_token: 'x', client_id: 'nope' });
    expect(unknownClient.status).toBe(401);
    expect(unknownClient.body.error).toBe('invalid_client');

    const badRefresh = await token({ grant_type: 'refresh_token', refresh_token: 'x', client_id: client.client_id });
    expect(badRefresh.body.error).toBe('invalid_grant');
  });

  it('refuses refresh for an inactive tenant', async () => {
    const key = h.addTenant('fading');
    const { body: client } = await register();
    const { verifier, challenge } = pkce();
    const r = await browserAuthorize(client.client_id, { scope: 'images:read', challenge, key });
    const t = await token({
      grant_type: 'authorization_code',
      code: new URL(r.location!).searchParams.get('code')!,
      code_verifier: verifier,
      client_id: client.client_id,
      redirect_uri: REDIRECT,
    });
    expect(t.status).toBe(200);
    h.tenants.get('fading')!.active = false;
    expect(await introspect(t.body.access_token)).toMatchObject({ active: true, tenant_active: false });
    const refresh = await token({ grant_type: 'refresh_token', refresh_token: t.body.refresh_token, client_id: client.client_id });
    expect(refresh.body.error).toBe('invalid_grant');
  });

  it('introspection answers inactive for unknown tokens', async () => {
    expect(await introspect('nope')).toEqual({ active: false });
  });
});
