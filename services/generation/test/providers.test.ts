/**
 * The provider adapters and client against a small local HTTP server that answers with the real upstream
 * shapes (Gemini-style generateContent for provA, images API for provB), including the awkward ones: HTML
 * error pages from a proxy, 429 with Retry-After / RetryInfo, billing refusals, oversized and malformed
 * bodies, several candidates. The last block drives the adapters against the sandbox upstream.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AppError } from '@imagegen/platform';
import sharp from 'sharp';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type RunningSandbox, startSandbox } from '../../sandbox-provider/src/service.js';
import { CircuitBreaker } from '../src/providers/breaker.js';
import { ProviderClient } from '../src/providers/client.js';
import { ProvAAdapter } from '../src/providers/prova.js';
import { ProvBAdapter } from '../src/providers/provb.js';
import { type ProviderAdapter, ProviderError, type ProviderRequest, transportFailure } from '../src/providers/types.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}
type Handler = (req: Seen, res: ServerResponse) => void | Promise<void>;

let server: Server;
let base: string;
let handler: Handler;
const seen: Seen[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const s: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) };
      seen.push(s);
      try {
        await handler(s, res);
      } catch (err) {
        res.statusCode = 599;
        res.end(String(err));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});
beforeEach(() => {
  seen.length = 0;
});

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8', ...headers });
  res.end(JSON.stringify(body));
};
const NGINX_502 =
  '<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n';

let png: Buffer;
beforeAll(async () => {
  png = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#0a0' } })
    .png()
    .toBuffer();
});

const reqA = (over: Partial<ProviderRequest> = {}): ProviderRequest => ({
  model: 'flash-image',
  prompt: 'a fox',
  images: [],
  n: 1,
  aspectRatio: '16:9',
  tier: '2k',
  ...over,
});
const reqB = (over: Partial<ProviderRequest> = {}): ProviderRequest => ({
  model: 'image-2',
  prompt: 'a whale',
  images: [],
  n: 2,
  aspectRatio: '3:2',
  size: '1536x1024',
  quality: 'high',
  outputFormat: 'png',
  ...over,
});

const signal = () => AbortSignal.timeout(5000);
async function failure(p: Promise<unknown>): Promise<ProviderError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ProviderError) return err;
    throw err;
  }
  throw new Error('expected the call to fail');
}
async function appError(p: Promise<unknown>): Promise<AppError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error('expected the call to fail');
}
const client = (adapter: ProviderAdapter, timeoutMs = 5000) =>
  new ProviderClient({ adapter, breaker: new CircuitBreaker(adapter.provider, { failureThreshold: 5, resetTimeoutMs: 1000 }), timeoutMs });

const geminiImage = (data = png.toString('base64')) => ({
  candidates: [
    {
      content: { role: 'model', parts: [{ text: 'Here it is' }, { inlineData: { mimeType: 'image/png', data } }] },
      finishReason: 'STOP',
      index: 0,
    },
  ],
  usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 1290, totalTokenCount: 1295 },
});

describe('provA (generateContent)', () => {
  const a = new ProvAAdapter(() => `${base}/`);

  it('sends the real request shape and reads the inline picture', async () => {
    handler = (_req, res) => json(res, 200, geminiImage());
    const out = await a.call(
      reqA({ systemInstruction: 'bold', search: true, images: [{ data: png, mimeType: 'image/png' }] }),
      'key-1',
      signal(),
    );
    expect(out.images).toHaveLength(1);
    expect(out.images[0].data.equals(png)).toBe(true);
    expect(out.tokens).toBe(1295);
    const [s] = seen;
    expect(s.method).toBe('POST');
    expect(s.url).toBe('/v1beta/models/flash-image:generateContent');
    expect(s.headers['x-goog-api-key']).toBe('key-1');
    expect(s.headers['content-type']).toBe('application/json');
    const body = JSON.parse(s.body.toString());
    expect(body).toEqual({
      contents: [{ role: 'user', parts: [{ text: 'a fox' }, { inlineData: { mimeType: 'image/png', data: png.toString('base64') } }] }],
      systemInstruction: { parts: [{ text: 'bold' }] },
      generationConfig: { responseModalities: ['TEXT', 'IMAGE'], imageConfig: { aspectRatio: '16:9', imageSize: '2K' } },
      tools: [{ googleSearch: {} }],
    });
  });

  it('takes a model configured in resource form ("models/x") without encoding the slash', async () => {
    handler = (_req, res) => json(res, 200, geminiImage());
    await a.call(reqA({ model: 'models/flash-image' }), 'k', signal());
    expect(seen[0].url).toBe('/v1beta/models/flash-image:generateContent');
  });

  it('classifies key refusals: 401, 403 PERMISSION_DENIED and 400 INVALID_ARGUMENT + API_KEY_INVALID', async () => {
    const bodies: [number, unknown][] = [
      [401, { error: { code: 401, message: 'Request had invalid authentication credentials.', status: 'UNAUTHENTICATED' } }],
      [403, { error: { code: 403, message: 'Permission denied: Consumer has been suspended.', status: 'PERMISSION_DENIED' } }],
      [
        400,
        {
          error: {
            code: 400,
            message: 'API key not valid. Please pass a valid API key.',
            status: 'INVALID_ARGUMENT',
            details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com' }],
          },
        },
      ],
    ];
    for (const [status, body] of bodies) {
      handler = (_req, res) => json(res, status, body);
      const e = await failure(a.call(reqA(), 'k', signal()));
      expect([e.kind, e.status]).toEqual(['auth', status]);
    }
  });

  it('reads 429 RESOURCE_EXHAUSTED: QuotaFailure per minute is a rate limit, RetryInfo reaches the client as Retry-After', async () => {
    const body = (quotaId: string, delay: string) => ({
      error: {
        code: 429,
        message:
          'You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.',
        status: 'RESOURCE_EXHAUSTED',
        details: [
          { '@type': 'type.googleapis.com/google.rpc.QuotaFailure', violations: [{ quotaMetric: 'm', quotaId }] },
          { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: delay },
        ],
      },
    });
    handler = (_req, res) => json(res, 429, body('GenerateRequestsPerMinutePerProjectPerModel', '17s'));
    let e = await failure(a.call(reqA(), 'k', signal()));
    expect([e.kind, e.retryAfterS]).toEqual(['rate_limit', 17]);
    handler = (_req, res) => json(res, 429, body('GenerateRequestsPerDayPerProjectPerModel-FreeTier', '3600s'));
    e = await failure(a.call(reqA(), 'k', signal()));
    expect([e.kind, e.retryAfterS]).toEqual(['quota', 3600]);

    // Two keys, both limited: 503 with the soonest wait the upstream named.
    let n = 0;
    handler = (_req, res) => json(res, 429, body('GenerateRequestsPerMinutePerProjectPerModel', n++ === 0 ? '41.5s' : '12s'));
    const err = await appError(client(a).generate('t1', ['k1', 'k2'], reqA()));
    expect(err.status).toBe(503);
    expect(err.body.code).toBe('PROVIDER_RATE_LIMITED');
    expect(err.headers['Retry-After']).toBe('12');
  });

  it('summarises an HTML 502 page from a proxy instead of passing markup on, and counts it as a server failure', async () => {
    handler = (_req, res) => {
      res.writeHead(502, { 'content-type': 'text/html' });
      res.end(NGINX_502);
    };
    const e = await failure(a.call(reqA(), 'k', signal()));
    expect(e.kind).toBe('server');
    expect(e.message).toBe('provA answered 502: 502 Bad Gateway');
    const err = await appError(client(a).generate('t1', ['k'], reqA()));
    expect(err.status).toBe(502);
    expect(JSON.stringify(err.body)).not.toContain('<');
  });

  it('treats a 200 whose body is not JSON as a server failure, not as "no image"', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html><head><title>Service maintenance</title></head><body>back soon</body></html>');
    };
    const e = await failure(a.call(reqA(), 'k', signal()));
    expect(e.kind).toBe('server');
    expect(e.message).toMatch(/without a JSON body: Service maintenance/);
  });

  it('refuses image data that is not base64', async () => {
    handler = (_req, res) => json(res, 200, geminiImage('data:image/png;base64,iVBORw0KGgo='));
    const e = await failure(a.call(reqA(), 'k', signal()));
    expect(e.kind).toBe('server');
    expect(e.message).toMatch(/not valid base64/);
  });

  it('caps the size of an answer (by Content-Length and while streaming)', async () => {
    const small = new ProvAAdapter(() => base, { maxResponseBytes: 4096 });
    const big = JSON.stringify(geminiImage(Buffer.alloc(8192, 1).toString('base64')));
    handler = (_req, res) => json(res, 200, JSON.parse(big));
    let e = await failure(small.call(reqA(), 'k', signal()));
    expect(e.kind).toBe('server');
    expect(e.message).toMatch(/4096-byte cap/);
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
      res.write(big.slice(0, 3000));
      setTimeout(() => res.end(big.slice(3000)), 20);
    };
    e = await failure(small.call(reqA(), 'k', signal()));
    expect(e.kind).toBe('server');
    expect(e.message).toMatch(/4096-byte cap/);
  });

  it('treats RECITATION as a content block and reports the upstream reason', async () => {
    handler = (_req, res) =>
      json(res, 200, { candidates: [{ content: { role: 'model', parts: [] }, finishReason: 'RECITATION', index: 0 }] });
    const e = await failure(a.call(reqA(), 'k', signal()));
    expect([e.kind, e.reason]).toEqual(['safety', 'RECITATION']);
    const err = await appError(client(a).generate('t1', ['k'], reqA()));
    expect(err.status).toBe(400);
    expect(err.body).toMatchObject({
      error: 'Content blocked by provider safety filters: RECITATION',
      code: 'CONTENT_BLOCKED',
      details: { provider: 'provA', reason: 'RECITATION' },
    });
  });

  it('finds a safety finishReason on any candidate, and pictures on every candidate (skipping thoughts and non-images)', async () => {
    handler = (_req, res) =>
      json(res, 200, {
        candidates: [
          { content: { role: 'model', parts: [{ text: 'I cannot draw that.' }] }, finishReason: 'STOP', index: 0 },
          { content: { role: 'model', parts: [] }, finishReason: 'IMAGE_SAFETY', finishMessage: 'blocked image', index: 1 },
        ],
      });
    const e = await failure(a.call(reqA(), 'k', signal()));
    expect([e.kind, e.reason]).toEqual(['safety', 'IMAGE_SAFETY (blocked image)']);

    const other = Buffer.from('not the answer');
    handler = (_req, res) =>
      json(res, 200, {
        candidates: [
          {
            content: {
              role: 'model',
              parts: [
                { inlineData: { mimeType: 'image/png', data: other.toString('base64') }, thought: true },
                { inlineData: { mimeType: 'text/plain', data: other.toString('base64') } },
                { inlineData: { mimeType: 'image/png', data: png.toString('base64') } },
              ],
            },
            finishReason: 'STOP',
          },
          {
            content: { role: 'model', parts: [{ inline_data: { mime_type: 'image/jpeg', data: png.toString('base64') } }] },
            finishReason: 'STOP',
          },
        ],
      });
    const out = await a.call(reqA(), 'k', signal());
    expect(out.images.map((i) => i.mimeType)).toEqual(['image/png', 'image/jpeg']);
  });

  it('answers a text-only reply and a finishReason other than STOP with "no image" (502), the model text included', async () => {
    handler = (_req, res) =>
      json(res, 200, { candidates: [{ content: { role: 'model', parts: [{ text: 'Which fox?' }] }, finishReason: 'STOP' }] });
    let err = await appError(client(a).generate('t1', ['k'], reqA()));
    expect(err.status).toBe(502);
    expect(err.body.error).toBe('Image generation failed: provA returned no image (finishReason STOP): Which fox?');
    handler = (_req, res) => json(res, 200, { candidates: [{ finishReason: 'NO_IMAGE' }] });
    err = await appError(client(a).generate('t1', ['k'], reqA()));
    expect(err.body.error).toBe('Image generation failed: provA returned no image (finishReason NO_IMAGE)');
  });

  it('times out (504) when the upstream does not answer in time', async () => {
    handler = (_req, res) => {
      setTimeout(() => json(res, 200, geminiImage()), 1500);
    };
    const err = await appError(client(a, 200).generate('t1', ['k'], reqA()));
    expect(err.status).toBe(504);
  });
});

describe('provB (images API)', () => {
  const b = new ProvBAdapter(() => base);
  const ok = (res: ServerResponse, n = 1, headers: Record<string, string> = {}) =>
    json(
      res,
      200,
      {
        created: 1,
        output_format: 'webp',
        data: Array.from({ length: n }, () => ({ b64_json: png.toString('base64') })),
        usage: { input_tokens: 5, output_tokens: 100, total_tokens: 105 },
      },
      headers,
    );

  it('sends generations as JSON with a bearer key', async () => {
    handler = (_req, res) => ok(res, 2);
    const out = await b.call(
      reqB({ outputFormat: 'webp', outputCompression: 80, background: 'opaque', moderation: 'low' }),
      'sk-1',
      signal(),
    );
    expect(out.images).toHaveLength(2);
    expect(out.images[0].mimeType).toBe('image/webp');
    expect(out.tokens).toBe(105);
    const [s] = seen;
    expect(s.url).toBe('/v1/images/generations');
    expect(s.headers.authorization).toBe('Bearer sk-1');
    expect(JSON.parse(s.body.toString())).toEqual({
      model: 'image-2',
      prompt: 'a whale',
      n: 2,
      size: '1536x1024',
      quality: 'high',
      output_format: 'webp',
      output_compression: 80,
      background: 'opaque',
      moderation: 'low',
    });
  });

  it('sends edits as multipart with image[] file parts', async () => {
    handler = (_req, res) => ok(res);
    await b.call(
      reqB({
        images: [
          { data: png, mimeType: 'image/png' },
          { data: png, mimeType: 'image/jpeg' },
        ],
      }),
      'sk-1',
      signal(),
    );
    const [s] = seen;
    expect(s.url).toBe('/v1/images/edits');
    expect(s.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    const form = await new Response(new Uint8Array(s.body), { headers: { 'content-type': String(s.headers['content-type']) } }).formData();
    const files = form.getAll('image[]') as File[];
    expect(files.map((f) => [f.name, f.type, f.size])).toEqual([
      ['image-1.png', 'image/png', png.length],
      ['image-2.jpg', 'image/jpeg', png.length],
    ]);
    expect(Object.fromEntries([...form.entries()].filter(([k]) => k !== 'image[]'))).toEqual({
      model: 'image-2',
      prompt: 'a whale',
      n: '2',
      size: '1536x1024',
      quality: 'high',
      output_format: 'png',
    });
  });

  it('fails over on a 400 billing_hard_limit_reached (a quota refusal, not a bad request)', async () => {
    handler = (req, res) =>
      req.headers.authorization === 'Bearer sk-broke'
        ? json(res, 400, {
            error: {
              message: 'Billing hard limit has been reached',
              type: 'invalid_request_error',
              param: null,
              code: 'billing_hard_limit_reached',
            },
          })
        : ok(res);
    const e = await failure(b.call(reqB(), 'sk-broke', signal()));
    expect(e.kind).toBe('quota');
    const logs: string[] = [];
    const out = await client(b).generate('t1', ['sk-broke', 'sk-good'], reqB(), (m) => logs.push(m));
    expect(out.images).toHaveLength(1);
    expect(logs).toEqual(['provB key 1 of 2 refused (quota, HTTP 400); trying the next key']);
  });

  it('separates insufficient_quota from rate_limit_exceeded and passes Retry-After on', async () => {
    handler = (_req, res) =>
      json(res, 429, {
        error: {
          message: 'You exceeded your current quota, please check your plan and billing details.',
          type: 'insufficient_quota',
          param: null,
          code: 'insufficient_quota',
        },
      });
    expect((await failure(b.call(reqB(), 'k', signal()))).kind).toBe('quota');
    handler = (_req, res) =>
      json(
        res,
        429,
        { error: { message: 'Rate limit reached for images per min (IPM).', type: 'requests', param: null, code: 'rate_limit_exceeded' } },
        { 'retry-after': '20' },
      );
    const e = await failure(b.call(reqB(), 'k', signal()));
    expect([e.kind, e.retryAfterS]).toEqual(['rate_limit', 20]);
    const err = await appError(client(b).generate('t1', ['k'], reqB()));
    expect(err.status).toBe(503);
    expect(err.headers['Retry-After']).toBe('20');
    // An HTTP date works too; retry-after-ms wins when present.
    handler = (_req, res) =>
      json(
        res,
        429,
        { error: { message: 'Rate limit', type: 'requests', code: 'rate_limit_exceeded' } },
        { 'retry-after-ms': '2500', 'retry-after': '99' },
      );
    expect((await failure(b.call(reqB(), 'k', signal()))).retryAfterS).toBe(3);
  });

  it('passes the moderation message on as the safety reason', async () => {
    const message = 'Your request was rejected by the safety system. safety_violations=[violence].';
    handler = (_req, res) =>
      json(res, 400, { error: { message, type: 'image_generation_user_error', param: null, code: 'moderation_blocked' } });
    const err = await appError(client(b).generate('t1', ['k'], reqB()));
    expect(err.status).toBe(400);
    expect(err.body).toMatchObject({ error: `Content blocked by provider safety filters: ${message}`, code: 'CONTENT_BLOCKED' });
  });

  it('summarises an HTML error page and refuses malformed base64', async () => {
    handler = (_req, res) => {
      res.writeHead(503, { 'content-type': 'text/html' });
      res.end('<!DOCTYPE html><html><body><h1>Service Unavailable</h1><p>The server is temporarily busy.</p></body></html>');
    };
    const e = await failure(b.call(reqB(), 'k', signal()));
    expect(e.kind).toBe('server');
    expect(e.message).toBe('provB answered 503: Service Unavailable The server is temporarily busy.');
    handler = (_req, res) => json(res, 200, { created: 1, data: [{ b64_json: '%%% not base64 %%%' }] });
    expect((await failure(b.call(reqB(), 'k', signal()))).message).toMatch(/not valid base64/);
  });
});

describe('adapters against the sandbox upstream', () => {
  let sb: RunningSandbox;
  beforeAll(async () => {
    sb = await startSandbox();
  });
  afterAll(async () => {
    await sb.stop();
  });

  it('provA: the real refusal shapes of the sandbox classify as the upstream ones would', async () => {
    const a = new ProvAAdapter(() => `${sb.httpUrl}/provA`);
    const kinds: [string, string, number | undefined][] = [];
    for (const key of ['bad-1', 'invalid-1', 'forbidden-1', 'quota-1', 'ratelimit-1']) {
      const e = await failure(a.call(reqA(), key, signal()));
      kinds.push([key, e.kind, e.retryAfterS]);
    }
    expect(kinds).toEqual([
      ['bad-1', 'auth', undefined],
      ['invalid-1', 'auth', undefined],
      ['forbidden-1', 'auth', undefined],
      ['quota-1', 'quota', 3600],
      ['ratelimit-1', 'rate_limit', 17],
    ]);
    const html = await failure(a.call(reqA({ prompt: 'x [[html-error:502]]' }), 'k', signal()));
    expect([html.kind, html.message]).toEqual(['server', 'provA answered 502: 502 Bad Gateway']);
    const safety = await failure(a.call(reqA({ prompt: 'x [[safety]]' }), 'k', signal()));
    expect([safety.kind, safety.reason]).toEqual(['safety', 'SAFETY']);
  });

  it('provB: rate limit with Retry-After, billing, HTML page, edits through multipart', async () => {
    const b = new ProvBAdapter(() => `${sb.httpUrl}/provB`);
    const rl = await failure(b.call(reqB(), 'ratelimit-1', signal()));
    expect([rl.kind, rl.retryAfterS]).toEqual(['rate_limit', 20]);
    expect((await failure(b.call(reqB(), 'quota-1', signal()))).kind).toBe('quota');
    expect((await failure(b.call(reqB(), 'billing-1', signal()))).kind).toBe('quota');
    const html = await failure(b.call(reqB({ prompt: 'x [[html-error:502]]' }), 'k', signal()));
    expect([html.kind, html.message]).toEqual(['server', 'provB answered 502: 502 Bad Gateway']);
    const out = await b.call(reqB({ images: [{ data: png, mimeType: 'image/png' }], size: 'auto', n: 1 }), 'k', signal());
    expect(out.images).toHaveLength(1);
    expect((await sharp(out.images[0].data).metadata()).format).toBe('png');
  });

  it('a network failure is a network error, not a timeout', async () => {
    const a = new ProvAAdapter(() => 'http://127.0.0.1:1');
    const s = signal();
    let caught: unknown;
    await a.call(reqA(), 'k', s).catch((err) => {
      caught = err;
    });
    const failure = transportFailure(caught, s, 'provA', 5000);
    expect(failure.kind).toBe('network');
    expect(failure.message).toBe('provA request failed: ECONNREFUSED');
  });
});
