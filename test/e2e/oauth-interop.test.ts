/**
 * Issue 15 item 6: OAuth and MCP interop with the real client libraries, through the gateway. Cursor's
 * dynamic registration (custom scheme + https + loopback redirect URIs, no application_type) succeeds
 * (openid-client); the protected-resource metadata at /.well-known/oauth-protected-resource/mcp names
 * `<base>/mcp` exactly (oauth4webapi, RFC 9728 §3.3); CORS with preflight on registration, token and the
 * metadata; an OAuth token without a tool's scope is answered HTTP 403 insufficient_scope, and the MCP SDK
 * client steps up (its auth() flow asks for the needed scope).
 */
import { type OAuthClientProvider, UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import * as oauth from 'oauth4webapi';
import * as oidc from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { jsonOf, mintTokens, pkcePair } from './mcp-support.js';

let stack: TestStack;
let tenant: TestTenant;
const insecure = { execute: [oidc.allowInsecureRequests] };

beforeAll(async () => {
  stack = await startTestStack();
  tenant = await stack.createTenant();
});
afterAll(async () => {
  await stack?.stop();
});

const CURSOR_REDIRECTS = [
  'cursor://anysphere.cursor-mcp/oauth/callback',
  'https://cursor.example.com/oauth/callback',
  'http://127.0.0.1:33418/callback',
];

async function register(body: Record<string, unknown>) {
  const res = await fetch(`${stack.baseUrl}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

describe('dynamic registration as Cursor sends it', () => {
  it('registers custom-scheme, https and loopback redirect URIs without application_type (openid-client)', async () => {
    const config = await oidc.dynamicClientRegistration(
      new URL(`${stack.baseUrl}/oauth`),
      {
        client_name: 'Cursor',
        redirect_uris: CURSOR_REDIRECTS,
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      },
      oidc.None(),
      insecure,
    );
    const meta = config.clientMetadata();
    expect(meta.client_id).toBeTruthy();
    expect(meta.redirect_uris).toEqual(CURSOR_REDIRECTS);
    expect(meta.client_secret).toBeUndefined();

    // The custom-scheme redirect URI is usable at the authorization endpoint: the request is valid and only
    // waits for the tenant to sign in (a non-browser client gets 401 login_required, not invalid_request).
    const { challenge } = pkcePair();
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: meta.client_id,
      redirect_uri: CURSOR_REDIRECTS[0],
      scope: 'images:read',
      state: 's',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    });
    const authz = await fetch(`${stack.baseUrl}/oauth/authorize?${q}`, { redirect: 'manual', headers: { accept: 'application/json' } });
    expect(authz.status).toBe(401);
    expect(((await authz.json()) as any).error).toBe('login_required');
  });

  it('still refuses dangerous or inconsistent redirect URIs', async () => {
    for (const uris of [
      ['javascript:alert(1)'],
      ['cursor://anysphere.cursor-mcp/oauth/callback', 'data:text/html,hi'],
      ['cursor://anysphere.cursor-mcp/oauth/callback', 'http://evil.example/callback'], // native: http only on loopback
      ['file:///etc/passwd'],
    ]) {
      const r = await register({ client_name: 'x', redirect_uris: uris, token_endpoint_auth_method: 'none' });
      expect(r.status, JSON.stringify(uris)).toBe(400);
      expect(r.body.error).toBe('invalid_redirect_uri');
    }
  });
});

describe('protected resource metadata', () => {
  it('names <base>/mcp exactly at /.well-known/oauth-protected-resource/mcp (oauth4webapi)', async () => {
    const resource = new URL(`${stack.baseUrl}/mcp`);
    const res = await oauth.resourceDiscoveryRequest(resource, { [oauth.allowInsecureRequests]: true });
    const meta = await oauth.processResourceDiscoveryResponse(resource, res);
    expect(meta.resource).toBe(`${stack.baseUrl}/mcp`);
    expect(meta.authorization_servers).toEqual([`${stack.baseUrl}/oauth`]);
  });

  it('keeps the bare document (resource = the base URL)', async () => {
    const res = await fetch(`${stack.baseUrl}/.well-known/oauth-protected-resource`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as any).resource).toBe(stack.baseUrl);
  });
});

describe('CORS for browser-based clients', () => {
  const origin = 'https://inspector.example';
  const preflight = (path: string) =>
    fetch(`${stack.baseUrl}${path}`, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
    });

  it('answers preflights on registration, token and the metadata documents (any origin, no credentials)', async () => {
    for (const path of [
      '/oauth/register',
      '/oauth/token',
      '/.well-known/oauth-authorization-server',
      '/.well-known/oauth-protected-resource/mcp',
    ]) {
      const res = await preflight(path);
      expect(res.status, path).toBe(204);
      expect(res.headers.get('access-control-allow-origin'), path).toBe('*');
      expect(res.headers.get('access-control-allow-methods'), path).toContain('POST');
      expect(res.headers.get('access-control-allow-headers')?.toLowerCase(), path).toContain('content-type');
      expect(res.headers.get('access-control-allow-credentials'), path).toBeNull();
    }
  });

  it('puts the CORS headers on the actual responses', async () => {
    const reg = await fetch(`${stack.baseUrl}/oauth/register`, {
      method: 'POST',
      headers: { origin, 'content-type': 'application/json' },
      body: JSON.stringify({
        client_name: 'Inspector',
        redirect_uris: ['http://localhost:6274/oauth/callback'],
        token_endpoint_auth_method: 'none',
      }),
    });
    expect(reg.status).toBe(201);
    expect(reg.headers.get('access-control-allow-origin')).toBe('*');
    const tok = await fetch(`${stack.baseUrl}/oauth/token`, {
      method: 'POST',
      headers: { origin, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code: 'nope', client_id: ((await reg.json()) as any).client_id }),
    });
    expect(tok.status).toBe(400);
    expect(tok.headers.get('access-control-allow-origin')).toBeTruthy();
    const meta = await fetch(`${stack.baseUrl}/.well-known/oauth-authorization-server`, { headers: { origin } });
    expect(meta.headers.get('access-control-allow-origin')).toBeTruthy();
  });
});

describe('insufficient scope on MCP', () => {
  const rpc = (token: string, body: unknown) =>
    fetch(`${stack.baseUrl}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(body),
    });

  it('answers HTTP 403 with WWW-Authenticate: Bearer error="insufficient_scope", scope="..."', async () => {
    const narrow = await mintTokens(stack.baseUrl, tenant.liveKey, 'images:read');
    const res = await rpc(narrow.access_token, {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'get_profile', arguments: {} },
    });
    expect(res.status).toBe(403);
    const challenge = res.headers.get('www-authenticate') ?? '';
    expect(challenge).toMatch(/^Bearer error="insufficient_scope", scope="[^"]*"/);
    const scope = /scope="([^"]*)"/.exec(challenge)?.[1]?.split(' ') ?? [];
    expect(scope).toContain('analytics:read');
    expect(scope).toContain('images:read'); // what the token already holds is kept
    expect(challenge).toContain(`resource_metadata="${stack.baseUrl}/.well-known/oauth-protected-resource/mcp"`);
    // within its scope the token works; tools/list is not scoped; API keys hold every scope
    const list = await rpc(narrow.access_token, {
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'list_images', arguments: {} },
    });
    expect(list.status).toBe(200);
    expect((await rpc(narrow.access_token, { jsonrpc: '2.0', id: 3, method: 'tools/list' })).status).toBe(200);
    expect(
      (await rpc(tenant.liveKey, { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'get_profile', arguments: {} } })).status,
    ).toBe(200);
  });

  it('the MCP SDK client steps up: its auth() flow asks for the needed scope', async () => {
    const narrow = await mintTokens(stack.baseUrl, tenant.liveKey, 'images:read');
    const redirectUrl = 'http://127.0.0.1:9/callback';
    const store: { client?: any; tokens?: any; verifier?: string; authUrl?: URL } = {
      tokens: { access_token: narrow.access_token, token_type: 'Bearer' }, // no refresh token: a new authorization is needed
    };
    const provider: OAuthClientProvider = {
      redirectUrl,
      clientMetadata: { client_name: 'sdk step-up', redirect_uris: [redirectUrl], token_endpoint_auth_method: 'none' },
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
    const client = new Client({ name: 'sdk-step-up', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${stack.baseUrl}/mcp`), { authProvider: provider }));
    try {
      const images = await client.callTool({ name: 'list_images', arguments: {} });
      expect(images.isError).toBeFalsy();
      expect(jsonOf(images).data).toBeDefined();
      const refused = await client.callTool({ name: 'get_profile', arguments: {} }).catch((e) => e);
      expect(refused).toBeInstanceOf(UnauthorizedError); // redirected to authorization for more scope
      const asked = store.authUrl?.searchParams.get('scope')?.split(' ') ?? [];
      expect(asked).toContain('analytics:read');
      expect(asked).toContain('images:read');
      expect(store.authUrl?.searchParams.get('resource')).toBe(`${stack.baseUrl}/mcp`);
    } finally {
      await client.close();
    }
  });
});
