import { randomBytes } from 'node:crypto';
import type * as Http from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/wait.js';
import {
  createInMemorySpanExporter,
  type InMemorySpanExporter,
  SpanKind,
  semconvStabilityOptIn,
  startTelemetry,
  type Telemetry,
  traceResponse,
  withoutPropagatedHeaders,
} from '../src/telemetry.js';

/**
 * Issue 41, in one process: the HTTP instrumentation's server span named by traceResponse, the trace headers a
 * proxy leaves to the propagators (one traceparent on the forwarded call, the client's tracestate and baggage),
 * and the stable HTTP attribute names.
 */

const CLIENT_HEADERS = { tracestate: 'client41=unit', baggage: 'client.step=unit' };

describe('OTEL_SEMCONV_STABILITY_OPT_IN', () => {
  it('adds http to what the operator set, and keeps an explicit http/dup', () => {
    expect(semconvStabilityOptIn(undefined)).toBe('http');
    expect(semconvStabilityOptIn('')).toBe('http');
    expect(semconvStabilityOptIn('database')).toBe('database,http');
    expect(semconvStabilityOptIn(' http ,database')).toBe('http,database');
    expect(semconvStabilityOptIn('http/dup')).toBe('http/dup');
  });
});

describe('without tracing', () => {
  it('a proxy forwards the trace headers as they came, and answers carry no traceresponse', () => {
    const headers = { traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`, ...CLIENT_HEADERS, accept: '*/*' };
    expect(withoutPropagatedHeaders(headers)).toEqual(headers);
    expect(traceResponse({})).toBeUndefined();
  });
});

/** One HTTP/1.1 request over a plain socket (no client instrumentation in between): status and headers as sent. */
function rawGet(port: number, path: string, headers: Record<string, string>): Promise<{ status: number; headers: Map<string, string> }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    let text = '';
    socket.on('data', (c) => {
      text += c.toString('latin1');
    });
    socket.on('end', () => {
      const [head] = text.split('\r\n\r\n');
      const [statusLine, ...lines] = head.split('\r\n');
      const map = new Map(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      resolve({ status: Number(statusLine.split(' ')[1]), headers: map });
    });
    socket.on('error', reject);
    const lines = Object.entries({ host: `127.0.0.1:${port}`, connection: 'close', ...headers }).map(([k, v]) => `${k}: ${v}`);
    socket.write(`GET ${path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n`);
  });
}

describe('while tracing (http and undici instrumentation in this process)', () => {
  let exporter: InMemorySpanExporter;
  let telemetry: Telemetry;
  let upstream: Server;
  let edge: Server;
  const seen: [string, string][][] = [];
  const port = (s: Server) => (s.address() as { port: number }).port;

  beforeAll(async () => {
    delete process.env.OTEL_SEMCONV_STABILITY_OPT_IN;
    exporter = await createInMemorySpanExporter();
    telemetry = await startTelemetry({}, 'imagegen-unit', { spanExporter: exporter });
    // Required once the instrumentation is in place (it patches the module as it is required).
    const { createServer } = createRequire(import.meta.url)('node:http') as typeof Http;
    const listen = async (handler: (req: IncomingMessage, res: ServerResponse) => void) => {
      const s = createServer(handler);
      await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
      return s;
    };
    // The upstream records the header lines it receives (duplicates kept).
    upstream = await listen((req, res) => {
      const lines: [string, string][] = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push([req.rawHeaders[i].toLowerCase(), req.rawHeaders[i + 1]]);
      seen.push(lines);
      res.end('ok');
    });
    // The edge answers with its traceresponse; /forward and /copy pass the request on with fetch (undici), the
    // first leaving the trace headers to the propagators, the second copying them as they came.
    edge = await listen(async (req, res) => {
      if (req.url === '/forward' || req.url === '/copy') {
        const { host: _host, connection: _c, ...rest } = req.headers as Record<string, string>;
        const headers = req.url === '/forward' ? withoutPropagatedHeaders(rest) : rest;
        await (await fetch(`http://127.0.0.1:${port(upstream)}/up`, { headers })).text();
      }
      const tr = traceResponse(req, 'req-41');
      if (tr) res.setHeader('traceresponse', tr);
      res.end('done');
    });
  });
  afterAll(async () => {
    await Promise.all([upstream, edge].map((s) => new Promise((r) => s?.close(r))));
    await telemetry?.stop();
  });

  const clientTrace = () => {
    const traceId = randomBytes(16).toString('hex');
    const spanId = randomBytes(8).toString('hex');
    return { traceId, spanId, headers: { traceparent: `00-${traceId}-${spanId}-01`, ...CLIENT_HEADERS } };
  };
  const spansOf = async (traceId: string, count: number) => {
    await telemetry.flush();
    return waitFor(
      () => {
        const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
        return spans.length >= count && spans;
      },
      { message: `${count} spans of trace ${traceId}` },
    );
  };

  it('traceresponse names the HTTP server span (a child of the client span, with the request id); stable attribute names', async () => {
    const client = clientTrace();
    const res = await rawGet(port(edge), '/plain?x=1', client.headers);
    expect(res.status).toBe(200);
    const [server] = await spansOf(client.traceId, 1);
    expect(server.kind).toBe(SpanKind.SERVER);
    expect(server.parentSpanContext?.spanId).toBe(client.spanId);
    expect(server.spanContext().traceState?.serialize()).toBe(CLIENT_HEADERS.tracestate);
    expect(res.headers.get('traceresponse')).toBe(`00-${client.traceId}-${server.spanContext().spanId}-01`);
    expect(server.attributes).toMatchObject({
      'http.request.method': 'GET',
      'http.response.status_code': 200,
      'url.path': '/plain',
      'imagegen.request_id': 'req-41',
    });
    for (const old of ['http.method', 'http.status_code', 'http.target', 'http.url', 'net.host.name', 'net.peer.ip'])
      expect(server.attributes[old], old).toBeUndefined();
  });

  it('a request that is not traced (a probe path) gets no traceresponse', async () => {
    const res = await rawGet(port(edge), '/metrics', clientTrace().headers);
    expect(res.status).toBe(200);
    expect(res.headers.has('traceresponse')).toBe(false);
  });

  it('a forwarded request carries one traceparent, its own client span, with the client tracestate and baggage', async () => {
    const client = clientTrace();
    await rawGet(port(edge), '/forward', client.headers);
    const lines = seen.at(-1) ?? [];
    const values = (name: string) => lines.filter(([k]) => k === name).map(([, v]) => v);
    const spans = await spansOf(client.traceId, 3);
    const call = spans.find((s) => s.kind === SpanKind.CLIENT);
    expect(values('traceparent')).toEqual([`00-${client.traceId}-${call?.spanContext().spanId}-01`]);
    expect(values('tracestate')).toEqual([CLIENT_HEADERS.tracestate]);
    expect(values('baggage')).toEqual([CLIENT_HEADERS.baggage]);
    expect(call?.attributes['http.request.method']).toBe('GET');
    // The upstream's server span joins the trace under the forwarding call.
    const up = spans.find((s) => s.kind === SpanKind.SERVER && s.attributes['url.path'] === '/up');
    expect(up?.parentSpanContext?.spanId).toBe(call?.spanContext().spanId);
  });

  it('(the check can fail) copied as they came, the client headers go out twice', async () => {
    const client = clientTrace();
    await rawGet(port(edge), '/copy', client.headers);
    const traceparents = (seen.at(-1) ?? []).filter(([k]) => k === 'traceparent');
    expect(traceparents.length).toBe(2);
  });
});
