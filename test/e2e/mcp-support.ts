import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { jsonSchema } from '@imagegen/api-schemas';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import Ajv, { type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { ERROR_META } from '../../services/mcp/src/tools/framework.js';
import { TOOL_OUTPUTS } from '../../services/mcp/src/tools/outputs.js';
import { closeObjects } from '../support/contract.js';

/** Helpers shared by the oauth*.test.ts and mcp*.test.ts end-to-end files. */

export const CHROMIUM = {
  executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
};

/** A local redirect_uri target that records the callback URLs it receives. */
export async function startCallbackServer(): Promise<{ url: string; next(): Promise<URL>; close(): Promise<void> }> {
  const waiting: ((u: URL) => void)[] = [];
  const received: URL[] = [];
  let base = '';
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', base);
    if (u.pathname !== '/callback') {
      res.writeHead(404).end(); // e.g. the browser's /favicon.ico
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html' }).end('<!DOCTYPE html><title>done</title><p>You can close this window.</p>');
    const w = waiting.shift();
    if (w) w(u);
    else received.push(u);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url: `${base}/callback`,
    next: () => {
      const r = received.shift();
      return r ? Promise.resolve(r) : new Promise<URL>((res) => waiting.push(res));
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

export function pkcePair() {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** Minimal cookie handling to drive the sign-in form with fetch (the browser path is tested with Chromium). */
class Jar {
  private cookies = new Map<string, string>();
  async fetch(url: string, init: RequestInit = {}) {
    const headers = new Headers(init.headers);
    if (this.cookies.size) headers.set('cookie', [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; '));
    const res = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair.indexOf('=');
      this.cookies.set(pair.slice(0, i).trim(), pair.slice(i + 1).trim());
    }
    return res;
  }
}

export async function registerClient(baseUrl: string, redirectUri: string, extra: Record<string, unknown> = {}) {
  const res = await fetch(`${baseUrl}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'e2e client', redirect_uris: [redirectUri], ...extra }),
  });
  if (res.status !== 201) throw new Error(`registration failed: ${res.status} ${await res.text()}`);
  return (await res.json()) as { client_id: string; [k: string]: unknown };
}

/**
 * Runs the authorization code flow with PKCE over plain HTTP (sign-in form posted with the API key,
 * all requested scopes approved) and returns the token response.
 */
export async function mintTokens(baseUrl: string, apiKey: string, scope: string) {
  const redirectUri = 'http://127.0.0.1:9/callback';
  const client = await registerClient(baseUrl, redirectUri);
  const { verifier, challenge } = pkcePair();
  const jar = new Jar();
  const html = { accept: 'text/html' };
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: client.client_id,
    redirect_uri: redirectUri,
    scope,
    state: 'mint',
    code_challenge: challenge,
    code_challenge_method: 'S256',
  });
  let res = await jar.fetch(`${baseUrl}/oauth/authorize?${q}`, { headers: html });
  res = await jar.fetch(res.headers.get('location') as string, { headers: html });
  const page = await res.text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1];
  if (!csrf) throw new Error(`sign-in page without form: ${res.status} ${page.slice(0, 300)}`);
  const form = new URLSearchParams({ csrf, api_key: apiKey, decision: 'approve' });
  for (const m of page.matchAll(/name="scope" value="([^"]+)"/g)) form.append('scope', m[1]);
  res = await jar.fetch(`${baseUrl}/oauth/signin`, {
    method: 'POST',
    headers: { ...html, 'content-type': 'application/x-www-form-urlencoded' },
    body: form.toString(),
  });
  res = await jar.fetch(res.headers.get('location') as string, { headers: html });
  const code = new URL(res.headers.get('location') as string).searchParams.get('code');
  if (!code) throw new Error(`no code: ${res.headers.get('location')}`);
  const tok = await fetch(`${baseUrl}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      code_verifier: verifier,
      client_id: client.client_id,
      redirect_uri: redirectUri,
    }),
  });
  if (tok.status !== 200) throw new Error(`token exchange failed: ${tok.status} ${await tok.text()}`);
  return (await tok.json()) as { access_token: string; refresh_token: string; scope: string; expires_in: number; token_type: string };
}

/** An MCP client connected through the gateway with the given credential (API key or access token). */
export async function mcpClient(baseUrl: string, credential: string, transport: 'http' | 'sse' = 'http') {
  const headers = { authorization: `Bearer ${credential}` };
  const client = new Client({ name: 'imagegen-e2e', version: '1.0.0' });
  if (transport === 'http') {
    await client.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { requestInit: { headers } }));
  } else {
    await client.connect(
      new SSEClientTransport(new URL(`${baseUrl}/sse`), {
        requestInit: { headers },
        eventSourceInit: {
          fetch: (url, init) => fetch(url, { ...init, headers: { ...(init?.headers as Record<string, string>), ...headers } }),
        },
      }),
    );
  }
  return client;
}

/** The text of a tool result's first content item. */
export function textOf(result: unknown): string {
  const c = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return c.find((x) => x.type === 'text')?.text ?? '';
}

export function jsonOf(result: unknown): any {
  return JSON.parse(textOf(result));
}

let outputValidators: Map<string, ValidateFunction> | undefined;

/** Each tool's result schema (its REST twin's answer, services/mcp/src/tools/outputs.ts), every object closed. */
function outputValidator(name: string): ValidateFunction | undefined {
  if (!outputValidators) {
    const ajv = new Ajv({ strict: false, allErrors: true });
    addFormats(ajv);
    outputValidators = new Map(
      Object.entries(TOOL_OUTPUTS).map(([tool, schema]) => [tool, ajv.compile(closeObjects(jsonSchema(schema)) as object)]),
    );
  }
  return outputValidators.get(name);
}

/** The `{status, error, details?, ...}` an error result carries in `_meta` (it has no structuredContent). */
export function errorOf(result: unknown): any {
  return (result as { _meta?: Record<string, unknown> })._meta?.[ERROR_META];
}

/**
 * Calls a tool and returns {ok, text, json (when the text is JSON), error (status and body of a failure), result,
 * images}. A successful result whose structuredContent does not match the tool's outputSchema exactly (a missing
 * or an undeclared field) throws, as does a failure with structuredContent or without its status.
 */
export async function callTool(client: Client, name: string, args: Record<string, unknown> = {}) {
  const result = await client.callTool({ name, arguments: args });
  if (!result.isError) {
    const validate = outputValidator(name);
    if (!validate) throw new Error(`${name}: no output schema`);
    if (!validate(result.structuredContent)) {
      throw new Error(`${name}: structuredContent is not its REST twin's answer: ${JSON.stringify(validate.errors?.slice(0, 5))}`);
    }
  } else if (result.structuredContent !== undefined || typeof errorOf(result)?.status !== 'number') {
    throw new Error(`${name}: an error result must carry its status in _meta, not structuredContent: ${JSON.stringify(result)}`);
  }
  const text = textOf(result);
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {}
  return {
    ok: !result.isError,
    text,
    json,
    error: errorOf(result),
    result,
    images: (result.content as { type: string }[]).filter((c) => c.type === 'image'),
  };
}
