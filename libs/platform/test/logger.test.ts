import { createRequire } from 'node:module';
import { Writable } from 'node:stream';
import { context, INVALID_SPAN_CONTEXT, trace } from '@opentelemetry/api';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createLogger, httpLogger, lazyChildLogger } from '../src/logger.js';
import { activeSpanContext, createInMemorySpanExporter, startTelemetry, withSpan } from '../src/telemetry.js';

function capture(level = 'info') {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      done();
    },
  });
  return { logger: pino({ level, base: { service: 'svc' }, redact: ['secret'] }, stream), lines };
}

describe('lazyChildLogger', () => {
  it('logs exactly what parent.child(bindings) logs', () => {
    const a = capture();
    const b = capture();
    lazyChildLogger(a.logger, { reqId: 'r1' }).info({ secret: 's', n: 1 }, 'hello %s', 'world');
    b.logger.child({ reqId: 'r1' }).info({ secret: 's', n: 1 }, 'hello %s', 'world');
    const strip = (l: Record<string, unknown>) => ({ ...l, time: 0 });
    expect(a.lines.map(strip)).toEqual(b.lines.map(strip));
    expect(a.lines[0]).toMatchObject({ reqId: 'r1', service: 'svc', secret: '[Redacted]', msg: 'hello world' });
  });

  it('makes no child for lines below the level, and one for all lines above it', () => {
    const { logger, lines } = capture('warn');
    let children = 0;
    const parent = new Proxy(logger, {
      get: (t, k) => {
        if (k !== 'child') return Reflect.get(t, k);
        return (...a: Parameters<typeof logger.child>) => {
          children++;
          return t.child(...a);
        };
      },
    });
    const lazy = lazyChildLogger(parent, { reqId: 'r2' });
    lazy.info('dropped');
    lazy.debug('dropped');
    expect(children).toBe(0);
    expect(lazy.level).toBe('warn');
    lazy.warn('kept');
    lazy.error(new Error('boom'));
    expect(children).toBe(1);
    expect(lines.map((l) => [l.reqId, l.msg])).toEqual([
      ['r2', 'kept'],
      ['r2', 'boom'],
    ]);
    expect(lazy.child({ x: 1 }).bindings()).toMatchObject({ reqId: 'r2', x: 1 });
  });
});

describe('createLogger', () => {
  function captured(level = 'info') {
    const lines: Record<string, unknown>[] = [];
    const stream = new Writable({
      write(chunk, _enc, done) {
        for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        done();
      },
    });
    return { logger: createLogger('svc', level, stream), lines };
  }

  it('never writes credentials: top-level and nested secret keys, credential headers of requests and responses', () => {
    const { logger, lines } = captured();
    const secrets = ['pw-1', 'ak-2', 'wh-3', 'pk-4', 'tok-5', 'bearer-6', 'cookie-7', 'goog-8', 'admin-9', 'cs-10', 'set-11', 'hk-12'];
    logger.info({ password: secrets[0], apiKey: secrets[1], user: { email: 'a@b.c', password: secrets[0] } }, 'signin');
    logger.info({ endpoint: { id: 'e1', webhookSecret: secrets[2] }, secret: secrets[2] }, 'webhook');
    logger.info({ provider: { name: 'provA', apiKey: secrets[3] }, providerKey: secrets[3] }, 'provider');
    logger.info({ token: secrets[4], session: { accessToken: secrets[4], refreshToken: secrets[4] } }, 'oauth');
    logger.info(
      {
        req: {
          method: 'GET',
          url: '/api/images',
          headers: {
            authorization: `Bearer ${secrets[5]}`,
            cookie: secrets[6],
            'x-goog-api-key': secrets[7],
            'x-admin-token': secrets[8],
            'x-api-key': secrets[1],
          },
        },
        res: { statusCode: 200, headers: { 'set-cookie': secrets[10] } },
      },
      'request',
    );
    logger.info({ client: { clientSecret: secrets[9] }, headers: { 'x-api-key': secrets[11], authorization: secrets[5] } }, 'client');
    const text = JSON.stringify(lines);
    for (const s of secrets) expect(text).not.toContain(s);
    expect(lines).toHaveLength(6);
    expect(lines[0]).toMatchObject({ password: '[redacted]', user: { email: 'a@b.c', password: '[redacted]' } });
    expect(lines[4]).toMatchObject({ req: { method: 'GET', url: '/api/images', headers: { authorization: '[redacted]' } } });
  });

  it('puts trace_id, span_id and trace_flags of the active span on every line, none outside spans or for invalid contexts', async () => {
    const exporter = await createInMemorySpanExporter();
    const telemetry = await startTelemetry({}, 'logger-test', { spanExporter: exporter, instrumentations: false });
    try {
      const { logger, lines } = captured();
      const child = lazyChildLogger(logger, { reqId: 'r9' });
      let ids: { traceId: string; spanId: string } | undefined;
      await withSpan('request', {}, async () => {
        ids = activeSpanContext();
        await new Promise((r) => setTimeout(r, 1));
        child.info('inside');
        logger.child({ rpc: '/x' }).warn('nested child');
      });
      logger.info('outside');
      context.with(trace.setSpanContext(context.active(), INVALID_SPAN_CONTEXT), () => logger.info('invalid'));
      expect(lines[0]).toMatchObject({ msg: 'inside', reqId: 'r9', trace_id: ids?.traceId, span_id: ids?.spanId, trace_flags: '01' });
      expect(lines[1]).toMatchObject({ msg: 'nested child', trace_id: ids?.traceId, span_id: ids?.spanId });
      expect(lines[2]).not.toHaveProperty('trace_id');
      expect(lines[3]).toMatchObject({ msg: 'invalid' });
      expect(lines[3]).not.toHaveProperty('trace_id');
    } finally {
      await telemetry.stop();
    }
  });
  it('request log lines (httpLogger) carry the path without its query string and no headers', async () => {
    // fastify is a dependency of the services, not of the platform library: take the gateway's.
    type App = {
      get(path: string, handler: () => Promise<unknown>): void;
      inject(o: { method: string; url: string; headers?: Record<string, string> }): Promise<unknown>;
      close(): Promise<void>;
    };
    const Fastify = createRequire(new URL('../../../services/gateway/package.json', import.meta.url))('fastify') as (o: object) => App;
    const { logger, lines } = captured();
    const app = Fastify({ loggerInstance: httpLogger(logger, 'http') });
    app.get('/oauth/callback', async () => ({ ok: true }));
    await app.inject({ method: 'GET', url: '/oauth/callback?code=SECRET-CODE&state=s1', headers: { 'x-api-key': 'sk_live_SECRET' } });
    await app.close();
    const incoming = lines.find((l) => l.msg === 'incoming request') as { req: Record<string, unknown>; component: string };
    expect(incoming.component).toBe('http');
    expect(incoming.req).toMatchObject({ method: 'GET', url: '/oauth/callback', route: '/oauth/callback' });
    expect(JSON.stringify(lines)).not.toMatch(/SECRET/);
  });
});
