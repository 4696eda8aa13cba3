import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintTokens } from '../e2e/mcp-support.js';
import type { TestTenant } from '../support/api.js';
import { waitFor } from '../support/wait.js';
import {
  type ExportedSpan,
  type HeaderTap,
  type OtlpReceiver,
  SPAN_KIND,
  startHeaderTap,
  startOtlpReceiver,
} from './fixtures/otlp-receiver.js';
import { type Journey, startJourney } from './harness.js';

/**
 * Issue 41: a client's W3C trace context through the distributed shape (every service its own process, started
 * with the telemetry preload, exporting OTLP/HTTP JSON to a receiver in this test). Three requests, each with the
 * client's own `traceparent`, `tracestate` and `baggage`: a REST generation, an MCP tool call (proxied by the
 * gateway to mcp, authorised with an OAuth access token that mcp checks at oauth) and an OAuth token request
 * (proxied to oauth). Between the gateway and mcp/oauth sits a header tap (an uninstrumented forwarder) that
 * records what the proxy sent.
 *
 * Each request is one trace, the client's: the gateway's HTTP server span is the child of the client's span and
 * is named by the answer's `traceresponse`; every other server span is the child of a client span of another
 * service, every consumer span of a producer span; the NATS consumers are in it. Every HTTP span uses the stable
 * HTTP semantic conventions, and no attribute holds a key, a token, a password or a prompt.
 * `PRINT_TRACE=1` prints each trace as a tree.
 */

const PROMPTS = { rest: 'a lighthouse keeper counting gulls at dawn', mcp: 'a harbour crane lifting a red piano' };
/** Deprecated (pre-1.23) HTTP and network attribute names, which the stable HTTP conventions replace. */
const OLD_ATTRIBUTE =
  /^(http\.(method|status_code|target|url|host|scheme|flavor|user_agent|client_ip|server_name|request_content_length(_uncompressed)?|response_content_length(_uncompressed)?)|net\.(host|peer|sock)\..+|net\.transport)$/;

interface ClientTrace {
  traceId: string;
  spanId: string;
  headers: { traceparent: string; tracestate: string; baggage: string };
}
function clientTrace(name: string): ClientTrace {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return {
    traceId,
    spanId,
    headers: { traceparent: `00-${traceId}-${spanId}-01`, tracestate: `client41=${name}`, baggage: `client.step=${name}` },
  };
}

interface Sent {
  client: ClientTrace;
  status: number;
  traceresponse: string | null;
}

let receiver: OtlpReceiver;
let mcpTap: HeaderTap;
let oauthTap: HeaderTap;
let j: Journey;
let tenant: TestTenant;
let tokens: Awaited<ReturnType<typeof mintTokens>>;
let sessionId: string;
const sent = {} as Record<'rest' | 'mcp' | 'oauth', Sent>;

/** Runs `fn` with the client's trace headers added to its fetches of `path` (mintTokens' token request). */
async function withTraceHeaders<T>(path: string, client: ClientTrace, fn: () => Promise<T>, seen: (r: Response) => void): Promise<T> {
  const plain = globalThis.fetch;
  globalThis.fetch = async (input, init) => {
    if (!String(input).endsWith(path)) return plain(input, init);
    const res = await plain(input, { ...init, headers: { ...(init?.headers as Record<string, string>), ...client.headers } });
    seen(res);
    return res;
  };
  try {
    return await fn();
  } finally {
    globalThis.fetch = plain;
  }
}

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  [mcpTap, oauthTap] = await Promise.all([startHeaderTap(), startHeaderTap()]);
  j = await startJourney({ otlpEndpoint: receiver.endpoint, env: { MCP_URL: mcpTap.url, OAUTH_URL: oauthTap.url } });
  mcpTap.setTarget(j.services.get('mcp')?.httpUrl as string);
  oauthTap.setTarget(j.services.get('oauth')?.httpUrl as string);
  tenant = await j.createTenant();

  // OAuth: the authorization code flow; its token request carries the client's trace.
  const oauth = clientTrace('oauth');
  tokens = await withTraceHeaders(
    '/oauth/token',
    oauth,
    () => mintTokens(j.baseUrl, tenant.liveKey, 'images:generate images:read'),
    (r) => {
      sent.oauth = { client: oauth, status: r.status, traceresponse: r.headers.get('traceresponse') };
    },
  );

  // REST generation.
  const rest = clientTrace('rest');
  const gen = await fetch(`${j.baseUrl}/api/images`, {
    method: 'POST',
    headers: { 'x-api-key': tenant.liveKey, 'content-type': 'application/json', ...rest.headers },
    body: JSON.stringify({ prompt: PROMPTS.rest }),
  });
  sessionId = ((await gen.json()) as { data?: { metadata?: { session_id?: string } } }).data?.metadata?.session_id ?? '';
  sent.rest = { client: rest, status: gen.status, traceresponse: gen.headers.get('traceresponse') };

  // MCP tool call with the access token (stateless streamable HTTP: one POST).
  const mcp = clientTrace('mcp');
  const call = await fetch(`${j.baseUrl}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${tokens.access_token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...mcp.headers,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'generate_image', arguments: { prompt: PROMPTS.mcp } },
    }),
  });
  const text = await call.text();
  const answer = text.split('\n').find((l) => l.startsWith('data: '));
  const result = answer ? JSON.parse(answer.slice(6)).result : undefined;
  expect(Boolean(result && !result.isError), text.slice(0, 500)).toBe(true);
  sent.mcp = { client: mcp, status: call.status, traceresponse: call.headers.get('traceresponse') };
}, 240_000);

afterAll(async () => {
  await j?.stop();
  await Promise.all([receiver?.close(), mcpTap?.close(), oauthTap?.close()]);
}, 60_000);

const traceOf = (traceId: string) => receiver.spans.filter((s) => s.traceId === traceId);
/** Spans of the trace whose parent is not in it (the gateway's root span names the client's span). */
const orphans = (spans: ExportedSpan[], client: ClientTrace) => {
  const ids = new Set(spans.map((s) => s.spanId));
  return spans.filter((s) => !(s.parentSpanId && (ids.has(s.parentSpanId) || s.parentSpanId === client.spanId)));
};

/** The NATS consumers of a generation's events: `<service> process <subject>`. */
const generationConsumers = () => [
  `imagegen-usage-metering process ${j.env.EVENTS_PREFIX}.library.image_stored`,
  `imagegen-usage-metering process ${j.env.EVENTS_PREFIX}.generation.execution_finished`,
  `imagegen-library process ${j.env.EVENTS_PREFIX}.generation.execution_finished`,
];
const consumersIn = (spans: ExportedSpan[]) => spans.filter((s) => s.kind === SPAN_KIND.CONSUMER).map((s) => `${s.service} ${s.name}`);

/** Waits until the trace holds every expected service (and the generation's consumers when asked) with no orphan. */
async function collect(step: keyof typeof sent, services: string[], consumers: boolean): Promise<ExportedSpan[]> {
  const { client } = sent[step];
  const complete = () => {
    const spans = traceOf(client.traceId);
    const have = new Set([...spans.map((s) => s.service), ...consumersIn(spans)]);
    if (!services.every((s) => have.has(`imagegen-${s}`))) return false;
    if (consumers && !generationConsumers().every((c) => have.has(c))) return false;
    return orphans(spans, client).length === 0 && spans;
  };
  // When it never completes, the assertions below name what is missing.
  await waitFor(complete, { message: `the ${step} trace complete`, timeout: 30_000, interval: 200 }).catch(() => undefined);
  const spans = traceOf(client.traceId);
  if (process.env.PRINT_TRACE) printTrace(step, spans, client);
  expect([...new Set(spans.map((s) => s.service))].sort(), `${step}: the services in the client's trace`).toEqual(
    expect.arrayContaining(services.map((s) => `imagegen-${s}`)),
  );
  return spans;
}

function printTrace(step: string, spans: ExportedSpan[], client: ClientTrace) {
  const depthOf = (s: ExportedSpan): number => {
    const parent = spans.find((p) => p.spanId === s.parentSpanId);
    return parent ? depthOf(parent) + 1 : 1;
  };
  const lines = [
    `${step}: ${spans.length} spans, ${new Set(spans.map((s) => s.service)).size} services, depth ${Math.max(0, ...spans.map(depthOf))}`,
  ];
  const walk = (parentId: string, depth: number) => {
    for (const s of spans.filter((x) => x.parentSpanId === parentId)) {
      lines.push(`${'  '.repeat(depth)}${s.service.replace('imagegen-', '')} [${Object.keys(SPAN_KIND)[s.kind - 1]}] ${s.name}`);
      walk(s.spanId, depth + 1);
    }
  };
  walk(client.spanId, 1);
  for (const s of orphans(spans, client)) lines.push(`  orphan: ${s.service} ${s.name} (parent ${s.parentSpanId ?? 'none'})`);
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** One trace, the client's: the gateway's server span under the client's span, every other span under it. */
function expectOneTrace(step: keyof typeof sent, spans: ExportedSpan[]): ExportedSpan {
  const { client, traceresponse, status } = sent[step];
  expect(status, step).toBeLessThan(300);
  const roots = spans.filter((s) => s.parentSpanId === client.spanId);
  expect(
    roots.map((s) => [s.service, s.kind, s.scope]),
    `${step}: the gateway's HTTP server span is the child of the client's span`,
  ).toEqual([['imagegen-gateway', SPAN_KIND.SERVER, '@opentelemetry/instrumentation-http']]);
  const root = roots[0];
  expect(
    orphans(spans, client).map((s) => `${s.service} ${s.name}`),
    `${step}: every span hangs from the root`,
  ).toEqual([]);
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  for (const s of spans) {
    const parent = s.parentSpanId ? byId.get(s.parentSpanId) : undefined;
    if (s.kind === SPAN_KIND.SERVER && s !== root) {
      expect(parent?.kind, `${step}: ${s.service} ${s.name}: parent is a client span`).toBe(SPAN_KIND.CLIENT);
      expect(parent?.service, `${step}: ${s.service} ${s.name}: parent in another service`).not.toBe(s.service);
    }
    if (s.kind === SPAN_KIND.CONSUMER) expect(parent?.kind, `${step}: ${s.name}: parent is a producer span`).toBe(SPAN_KIND.PRODUCER);
  }
  expect(traceresponse, `${step}: traceresponse`).toBe(`00-${client.traceId}-${root.spanId}-01`);
  return root;
}

/** The proxy's request to mcp or oauth: one traceparent (its own client span's), the client's tracestate and baggage. */
function expectProxiedOnce(step: keyof typeof sent, tap: HeaderTap, spans: ExportedSpan[], root: ExportedSpan, upstream: string) {
  const { client } = sent[step];
  const server = spans.find((s) => s.service === `imagegen-${upstream}` && s.kind === SPAN_KIND.SERVER && s.parentSpanId);
  const proxySpan = spans.find((s) => s.spanId === server?.parentSpanId);
  expect(proxySpan?.service, `${step}: ${upstream}'s server span is the child of the gateway's proxy span`).toBe('imagegen-gateway');
  const forwarded = tap.requests.filter((r) => r.headers.some(([k, v]) => k === 'traceparent' && v.includes(client.traceId)));
  expect(forwarded.length, `${step}: requests through the tap in the client's trace`).toBeGreaterThan(0);
  const fromGateway = forwarded.find((r) => r.headers.some(([k, v]) => k === 'traceparent' && v.includes(proxySpan?.spanId ?? '?')));
  const values = (name: string) => (fromGateway?.headers ?? []).filter(([k]) => k === name).map(([, v]) => v);
  expect(values('traceparent'), `${step}: one traceparent, the proxy span's`).toEqual([`00-${client.traceId}-${proxySpan?.spanId}-01`]);
  expect(values('tracestate'), `${step}: the client's tracestate, once`).toEqual([client.headers.tracestate]);
  expect(values('baggage'), `${step}: the client's baggage, once`).toEqual([client.headers.baggage]);
  expect(server?.traceState, `${step}: ${upstream}'s server span carries the client's tracestate`).toBe(client.headers.tracestate);
  expect(root.traceState).toBe(client.headers.tracestate);
}

describe("a client's trace through the distributed shape", () => {
  it('REST generation: one trace across HTTP, gRPC and NATS, the consumers in it', async () => {
    const spans = await collect('rest', ['gateway', 'generation', 'sandbox-provider', 'library', 'usage-metering'], true);
    expectOneTrace('rest', spans);
    expect(consumersIn(spans)).toEqual(expect.arrayContaining(generationConsumers()));
  });

  it('MCP tool call: the proxy hop joins the trace (mcp, its token check at oauth, the generation and the consumers)', async () => {
    const spans = await collect('mcp', ['gateway', 'mcp', 'oauth', 'generation', 'sandbox-provider', 'library', 'usage-metering'], true);
    const root = expectOneTrace('mcp', spans);
    expect(consumersIn(spans)).toEqual(expect.arrayContaining(generationConsumers()));
    expectProxiedOnce('mcp', mcpTap, spans, root, 'mcp');
  });

  it('OAuth token request: the proxy hop joins the trace', async () => {
    const spans = await collect('oauth', ['gateway', 'oauth'], false);
    const root = expectOneTrace('oauth', spans);
    expectProxiedOnce('oauth', oauthTap, spans, root, 'oauth');
  });

  it('every answer names its trace (traceresponse, X-Request-Id): errors, 404, 304, proxied answers, no traceparent', async () => {
    const session = `/api/sessions/${encodeURIComponent(sessionId)}`;
    const etag = (await fetch(`${j.baseUrl}${session}`, { headers: { 'x-api-key': tenant.liveKey } })).headers.get('etag');
    const cases: [string, string, Record<string, string>, number][] = [
      ['401', '/api/profile', {}, 401],
      ['404', '/api/no-such-thing', { 'x-api-key': tenant.liveKey }, 404],
      ['304', session, { 'x-api-key': tenant.liveKey, 'if-none-match': String(etag) }, 304],
      ['proxied', '/.well-known/oauth-authorization-server', {}, 200],
    ];
    const answers: { what: string; client?: ClientTrace; traceresponse: string; requestId: string | null }[] = [];
    for (const [what, path, headers, status] of cases) {
      const client = clientTrace(what);
      const res = await fetch(`${j.baseUrl}${path}`, { headers: { ...headers, ...client.headers } });
      await res.arrayBuffer();
      expect(res.status, what).toBe(status);
      answers.push({ what, client, traceresponse: String(res.headers.get('traceresponse')), requestId: res.headers.get('x-request-id') });
    }
    const own = await fetch(`${j.baseUrl}/api/profile`, { headers: { 'x-api-key': tenant.liveKey } });
    await own.arrayBuffer();
    answers.push({
      what: 'no traceparent',
      traceresponse: String(own.headers.get('traceresponse')),
      requestId: own.headers.get('x-request-id'),
    });
    for (const { what, client, traceresponse, requestId } of answers) {
      const [, traceId, spanId, flags] = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(traceresponse) ?? [];
      expect(traceId, `${what}: ${traceresponse}`).toBe(client?.traceId ?? traceId ?? 'a trace id');
      expect(flags, what).toBe('01');
      // The span it names is the gateway's HTTP server span, the child of the client's span (a root without one).
      const server = await waitFor(() => receiver.spans.find((s) => s.spanId === spanId), { message: `${what}: the span named` });
      expect([server.service, server.kind, server.traceId, server.parentSpanId], what).toEqual([
        'imagegen-gateway',
        SPAN_KIND.SERVER,
        traceId,
        client?.spanId,
      ]);
      // ...which records the answer's X-Request-Id (a trace is found by either).
      expect(server.attributes['imagegen.request_id'], what).toBe(requestId);
    }
  });

  it('no service starts a trace of its own: every server span but the gateway root has a client parent', async () => {
    const unjoined = () => {
      const byId = new Map(receiver.spans.map((s) => [s.spanId, s]));
      return receiver.spans
        .filter(
          (s) =>
            s.kind === SPAN_KIND.SERVER && s.service !== 'imagegen-gateway' && byId.get(s.parentSpanId ?? '')?.kind !== SPAN_KIND.CLIENT,
        )
        .map((s) => `${s.service} ${s.name} (parent ${s.parentSpanId ?? 'none'})`);
    };
    // A client span exported by another process may arrive after its server span: wait a little for it.
    await waitFor(() => unjoined().length === 0, {
      message: 'every server span with its client parent',
      timeout: 5000,
      interval: 200,
    }).catch(() => undefined);
    expect(unjoined()).toEqual([]);
    expect(receiver.refused).toEqual([]);
  });

  it('HTTP spans use the stable semantic conventions only', () => {
    const old = new Set<string>();
    for (const s of receiver.spans)
      for (const k of Object.keys(s.attributes)) if (OLD_ATTRIBUTE.test(k)) old.add(`${s.service} ${s.scope}: ${k}`);
    expect([...old].sort()).toEqual([]);
    const http = receiver.spans.filter((s) => s.scope === '@opentelemetry/instrumentation-http');
    expect(http.some((s) => s.kind === SPAN_KIND.SERVER)).toBe(true);
    for (const s of http) {
      expect(s.attributes['http.request.method'], `${s.service} ${s.name}`).toBeTruthy();
      expect(s.attributes['http.response.status_code'], `${s.service} ${s.name}`).toBeTruthy();
      if (s.kind === SPAN_KIND.SERVER) expect(s.attributes['url.path'], `${s.service} ${s.name}`).toBeTruthy();
    }
  });

  it('no key, token, password or prompt in any attribute (of a span or of its events)', () => {
    const secrets = {
      'live key': tenant.liveKey,
      'test key': tenant.testKey,
      'access token': tokens.access_token,
      'refresh token': tokens.refresh_token,
      'admin token': j.adminToken,
      'admin password': j.env.ADMIN_PASSWORD,
      'credentials key': j.env.CREDENTIALS_KEY,
      'REST prompt': PROMPTS.rest,
      'MCP prompt': PROMPTS.mcp,
    };
    const leaks: string[] = [];
    for (const s of receiver.spans) {
      const text = JSON.stringify([s.name, s.attributes, s.events, s.statusMessage]);
      for (const [what, value] of Object.entries(secrets))
        if (value && text.includes(value)) leaks.push(`${what} in ${s.service} ${s.name}`);
      // Any credential, not only this test's: an API key's prefix or an Authorization value.
      if (/Bearer |sk_(live|test)_/.test(text)) leaks.push(`a credential in ${s.service} ${s.name}`);
    }
    expect(leaks).toEqual([]);
  });
});
