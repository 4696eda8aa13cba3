import { type OAuthClientProvider, UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import * as oidc from 'openid-client';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';
import { CHROMIUM, jsonOf, mcpClient, pkcePair, registerClient, startCallbackServer } from './mcp-support.js';

/**
 * OAuth 2.1 for MCP (SPEC 4.10, 5) through the gateway: dynamic registration, authorization code +
 * PKCE with the sign-in page driven in headless Chromium, code exchange with openid-client, MCP calls
 * with the access token, refresh rotation and reuse detection, and the refusals.
 */

let stack: TestStack;
let tenant: TestTenant;
let browser: Browser;
let callback: Awaited<ReturnType<typeof startCallbackServer>>;
let issuer: URL;
const insecure = { execute: [oidc.allowInsecureRequests] };

beforeAll(async () => {
  stack = await startTestStack();
  tenant = await stack.createTenant();
  callback = await startCallbackServer();
  browser = await chromium.launch(CHROMIUM);
  issuer = new URL(`${stack.baseUrl}/oauth`);
});

afterAll(async () => {
  await browser?.close();
  await callback?.close();
  await stack?.stop();
});

async function registerWithOpenIdClient(scope: string) {
  return oidc.dynamicClientRegistration(
    issuer,
    { client_name: 'Playwright MCP client', redirect_uris: [callback.url], scope, token_endpoint_auth_method: 'none' },
    oidc.None(),
    insecure,
  );
}

/** Opens the authorization URL in a phone-sized Chromium page, signs in with the key and approves. */
async function approveInBrowser(authorizationUrl: URL, apiKey: string, opts: { uncheck?: string[]; clientName?: string } = {}) {
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  const page = await context.newPage();
  try {
    const landed = callback.next();
    await page.goto(authorizationUrl.href);
    expect(page.url().startsWith(`${stack.baseUrl}/?return_to=`)).toBe(true);
    await waitFor(async () => (await page.locator('h1').textContent()) === 'Sign in to imagegen', { message: 'the sign-in page' });
    expect(await page.content()).toContain(opts.clientName ?? 'Playwright MCP client');
    // usable on a phone: nothing wider than the viewport
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
    expect(await page.locator('#api_key').getAttribute('type')).toBe('password');
    await page.fill('#api_key', apiKey);
    for (const s of opts.uncheck ?? []) await page.uncheck(`input[name="scope"][value="${s}"]`);
    await page.click('button[value="approve"]');
    const url = await landed;
    await page.waitForLoadState();
    // the key never appears in the page or in any URL the browser visited
    expect(page.url()).not.toContain(apiKey);
    return url;
  } finally {
    await context.close();
  }
}

async function rawToken(form: Record<string, string>) {
  const res = await fetch(`${stack.baseUrl}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

describe('discovery', () => {
  it('points MCP clients from a 401 to the authorization server', async () => {
    const res = await fetch(`${stack.baseUrl}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(res.status).toBe(401);
    const challenge = res.headers.get('www-authenticate') ?? '';
    expect(challenge).toBe(`Bearer resource_metadata="${stack.baseUrl}/.well-known/oauth-protected-resource"`);
    const prm = (await (await fetch(`${stack.baseUrl}/.well-known/oauth-protected-resource`)).json()) as any;
    expect(prm).toMatchObject({ resource: stack.baseUrl, authorization_servers: [`${stack.baseUrl}/oauth`] });
    expect(prm.scopes_supported).toHaveLength(12);
    for (const p of [
      '/oauth/.well-known/openid-configuration',
      '/.well-known/oauth-authorization-server',
      '/.well-known/oauth-authorization-server/oauth',
    ]) {
      const d = (await (await fetch(`${stack.baseUrl}${p}`)).json()) as any;
      expect(d.issuer, p).toBe(issuer.href);
      expect(d.code_challenge_methods_supported).toEqual(['S256']);
      expect(d.scopes_supported).toEqual(expect.arrayContaining(prm.scopes_supported));
    }
  });

  it('answers non-HTML clients without a session with 401 login_required', async () => {
    const client = await registerClient(stack.baseUrl, callback.url);
    const { challenge } = pkcePair();
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: client.client_id,
      redirect_uri: callback.url,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      scope: 'images:read',
      state: 'abc',
    });
    const res = await fetch(`${stack.baseUrl}/oauth/authorize?${q}`, { headers: { accept: 'application/json' }, redirect: 'manual' });
    expect(res.status).toBe(401);
    const body = (await res.json()) as any;
    expect(body).toMatchObject({ error: 'login_required', login_required: true });
    expect(body.login_url.startsWith(`${stack.baseUrl}/?return_to=`)).toBe(true);
    const html = await fetch(`${stack.baseUrl}/oauth/authorize?${q}`, { headers: { accept: 'text/html' }, redirect: 'manual' });
    expect(html.status).toBe(303);
    expect(html.headers.get('location')?.startsWith(`${stack.baseUrl}/?return_to=`)).toBe(true);
  });
});

describe('authorization code flow with openid-client and Chromium', () => {
  let config: oidc.Configuration;
  let tokens: oidc.TokenEndpointResponse;

  it('registers, authorizes with PKCE in the browser and exchanges the code', async () => {
    config = await registerWithOpenIdClient('images:read images:generate sessions:read analytics:read');
    const meta = config.clientMetadata();
    expect(meta.client_id).toBeTruthy();
    expect(meta.token_endpoint_auth_method).toBe('none');
    expect(meta.client_secret).toBeUndefined();

    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: callback.url,
      scope: 'images:read images:generate sessions:read analytics:read',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
    });
    const cb = await approveInBrowser(url, tenant.liveKey, { uncheck: ['analytics:read'] });
    expect(cb.searchParams.get('state')).toBe(state);
    tokens = await oidc.authorizationCodeGrant(config, cb, { pkceCodeVerifier: verifier, expectedState: state });
    expect(tokens.token_type.toLowerCase()).toBe('bearer');
    expect(tokens.expires_in).toBe(3600);
    expect(typeof tokens.refresh_token).toBe('string');
    expect(tokens.scope?.split(' ').sort()).toEqual(['images:generate', 'images:read', 'sessions:read']);
  });

  it('calls MCP tools with the access token, within its scopes', async () => {
    const client = await mcpClient(stack.baseUrl, tokens.access_token);
    try {
      expect((await client.listTools()).tools).toHaveLength(50);
      const gen = await client.callTool({ name: 'generate_image', arguments: { prompt: 'a lighthouse at dusk', session_id: 'oauth-e2e' } });
      expect(gen.isError).toBeFalsy();
      expect(jsonOf(gen).metadata.session_id).toBe('oauth-e2e');
      expect((gen.content as { type: string }[]).some((c) => c.type === 'image')).toBe(true);
      const list = await client.callTool({ name: 'list_images', arguments: { session_id: 'oauth-e2e' } });
      expect(jsonOf(list).data).toHaveLength(1);
      // Outside its scopes: HTTP 403 insufficient_scope (MCP authorization; this client has no auth provider to step up).
      const refused = await client.callTool({ name: 'get_profile', arguments: {} }).catch((e) => e);
      expect(refused.code).toBe(403);
      expect(String(refused.message)).toContain('Insufficient scope: get_profile requires analytics:read');
      const del = await client.callTool({ name: 'delete_image', arguments: { image_id: jsonOf(list).data[0].id } }).catch((e) => e);
      expect(del.code).toBe(403);
      expect(String(del.message)).toContain('images:delete');
    } finally {
      await client.close();
    }
  });

  it('rotates refresh tokens and revokes the family when a used one comes back', async () => {
    const first = await oidc.refreshTokenGrant(config, tokens.refresh_token as string);
    expect(first.refresh_token).toBeTruthy();
    expect(first.refresh_token).not.toBe(tokens.refresh_token);
    expect(first.access_token).not.toBe(tokens.access_token);
    const client = await mcpClient(stack.baseUrl, first.access_token);
    expect((await client.callTool({ name: 'list_sessions', arguments: {} })).isError).toBeFalsy();
    await client.close();

    const reuse = await oidc.refreshTokenGrant(config, tokens.refresh_token as string).catch((e) => e);
    expect(reuse).toBeInstanceOf(oidc.ResponseBodyError);
    expect(reuse.error).toBe('invalid_grant');
    // the whole family is gone: the newest refresh token and access token too
    const newest = await oidc.refreshTokenGrant(config, first.refresh_token as string).catch((e) => e);
    expect(newest.error).toBe('invalid_grant');
    // Refused once the mcp service's introspection cache (at most 5 s) lets the revocation through.
    const res = await waitFor(
      async () => {
        const r = await fetch(`${stack.baseUrl}/mcp`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${first.access_token}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
        });
        await r.arrayBuffer();
        return r.status === 401 && r;
      },
      { message: 'the revoked access token refused (401)', interval: 200 },
    );
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toContain('error="invalid_token"');
  });

  it('keeps API keys and tokens apart: a garbage token is invalid_token, an sk_ value is an API key', async () => {
    const bad = await fetch(`${stack.baseUrl}/mcp`, {
      method: 'POST',
      headers: { authorization: 'Bearer not-a-token', 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(bad.status).toBe(401);
    expect(((await bad.json()) as any).error).toBe('invalid_token');
    const badKey = await fetch(`${stack.baseUrl}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer sk_live_${'x'.repeat(40)}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(badKey.status).toBe(401);
    expect(((await badKey.json()) as any).error).toBe('Invalid or missing API key');
  });
});

describe('the MCP SDK client’s own OAuth support', () => {
  it('discovers the server from the 401, registers, signs in (Chromium) and calls tools', async () => {
    const store: { client?: any; tokens?: any; verifier?: string; authUrl?: URL } = {};
    const provider: OAuthClientProvider = {
      redirectUrl: callback.url,
      clientMetadata: { client_name: 'Playwright MCP client', redirect_uris: [callback.url], token_endpoint_auth_method: 'none' },
      clientInformation: () => store.client,
      saveClientInformation: (c) => {
        store.client = c;
      },
      tokens: () => store.tokens,
      saveTokens: (t) => {
        store.tokens = t;
      },
      redirectToAuthorization: (url) => {
        store.authUrl = url;
      },
      saveCodeVerifier: (v) => {
        store.verifier = v;
      },
      codeVerifier: () => store.verifier as string,
    };
    const url = new URL(`${stack.baseUrl}/mcp`);
    const first = new StreamableHTTPClientTransport(url, { authProvider: provider });
    const refused = await new Client({ name: 'sdk-oauth', version: '1' }).connect(first).catch((e) => e);
    expect(refused).toBeInstanceOf(UnauthorizedError);
    expect(store.client?.client_id).toBeTruthy();
    expect(store.authUrl?.searchParams.get('resource')?.replace(/\/$/, '')).toBe(stack.baseUrl);
    expect(store.authUrl?.searchParams.get('scope')?.split(' ')).toHaveLength(12);
    const cb = await approveInBrowser(store.authUrl as URL, tenant.liveKey);
    await first.finishAuth(cb.searchParams.get('code') as string);
    expect(store.tokens?.scope?.split(' ')).toHaveLength(12);

    const client = new Client({ name: 'sdk-oauth', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
    try {
      const profile = await client.callTool({ name: 'get_profile', arguments: {} });
      expect(jsonOf(profile).tenant.tenantId).toBe(tenant.tenantId);
    } finally {
      await client.close();
    }
  });
});

describe('refusals', () => {
  it('refuses plain PKCE at the authorization endpoint (invalid_request)', async () => {
    const client = await registerClient(stack.baseUrl, callback.url);
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: client.client_id,
      redirect_uri: callback.url,
      code_challenge: 'a'.repeat(43),
      code_challenge_method: 'plain',
      state: 's1',
    });
    const res = await fetch(`${stack.baseUrl}/oauth/authorize?${q}`, { redirect: 'manual' });
    expect(res.status).toBe(303);
    const loc = new URL(res.headers.get('location') as string);
    expect(loc.origin + loc.pathname).toBe(callback.url);
    expect(loc.searchParams.get('error')).toBe('invalid_request');
    expect(loc.searchParams.get('state')).toBe('s1');
  });

  it('refuses a wrong code_verifier (invalid_grant)', async () => {
    const config = await registerWithOpenIdClient('images:read');
    const verifier = oidc.randomPKCECodeVerifier();
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: callback.url,
      scope: 'images:read',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state: 'w1',
    });
    const cb = await approveInBrowser(url, tenant.testKey);
    const err = await oidc
      .authorizationCodeGrant(config, cb, { pkceCodeVerifier: oidc.randomPKCECodeVerifier(), expectedState: 'w1' })
      .catch((e) => e);
    expect(err).toBeInstanceOf(oidc.ResponseBodyError);
    expect(err.error).toBe('invalid_grant');
  });

  it('refuses an unregistered redirect_uri at authorize (invalid_request) and a different one at the token endpoint (invalid_grant)', async () => {
    const client = await registerClient(stack.baseUrl, callback.url);
    const { verifier, challenge } = pkcePair();
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: client.client_id,
      redirect_uri: 'https://attacker.example/cb',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    });
    const res = await fetch(`${stack.baseUrl}/oauth/authorize?${q}`, { headers: { accept: 'application/json' }, redirect: 'manual' });
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error).toBe('invalid_request');

    // a real code, exchanged with another redirect_uri
    const config = await oidc.discovery(issuer, client.client_id, undefined, oidc.None(), insecure);
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: callback.url,
      scope: 'images:read',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    });
    const cb = await approveInBrowser(url, tenant.liveKey, { clientName: 'e2e client' });
    const wrong = await rawToken({
      grant_type: 'authorization_code',
      code: cb.searchParams.get('code') as string,
      code_verifier: verifier,
      client_id: client.client_id,
      redirect_uri: `${callback.url}/other`,
    });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toBe('invalid_grant');
  });

  it('answers the other OAuth error codes', async () => {
    const client = await registerClient(stack.baseUrl, callback.url, { scope: 'images:read' });
    expect((await rawToken({ grant_type: 'password', client_id: client.client_id })).body.error).toBe('unsupported_grant_type');
    const unknown = await rawToken({ grant_type: 'refresh_token', refresh_token: 'x', client_id: 'nope' });
    expect(unknown.status).toBe(401);
    expect(unknown.body.error).toBe('invalid_client');
    expect((await rawToken({ grant_type: 'authorization_code', client_id: client.client_id })).body.error).toBe('invalid_request');
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: client.client_id,
      redirect_uri: callback.url,
      code_challenge: pkcePair().challenge,
      code_challenge_method: 'S256',
      scope: 'images:delete',
    });
    const res = await fetch(`${stack.baseUrl}/oauth/authorize?${q}`, { redirect: 'manual' });
    expect(new URL(res.headers.get('location') as string).searchParams.get('error')).toBe('invalid_scope');
  });

  it('shows the sign-in error for a wrong key and keeps the form', async () => {
    const config = await registerWithOpenIdClient('images:read');
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: callback.url,
      scope: 'images:read',
      code_challenge: pkcePair().challenge,
      code_challenge_method: 'S256',
    });
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(url.href);
    await page.fill('#api_key', `sk_live_${'Z'.repeat(40)}`);
    await page.click('button[value="approve"]');
    await waitFor(async () => (await page.locator('.err').textContent()) === 'Invalid or missing API key', {
      message: 'the sign-in error shown',
    });
    expect(await page.inputValue('#api_key')).toBe('');
    await context.close();
  });

  it('limits the token endpoint to 30 requests per minute per client IP', async () => {
    let limited: Awaited<ReturnType<typeof rawToken>> | undefined;
    for (let i = 0; i < 35 && !limited; i++) {
      const r = await rawToken({ grant_type: 'refresh_token', refresh_token: 'x', client_id: 'nope' });
      if (r.status === 429) limited = r;
    }
    expect(limited).toBeDefined();
    expect(Number(limited?.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});
