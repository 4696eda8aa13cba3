import sharp from 'sharp';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type RunningSandbox, startSandbox } from '../src/service.js';

let sb: RunningSandbox;
beforeAll(async () => {
  sb = await startSandbox();
});
afterAll(async () => {
  await sb.stop();
});
beforeEach(async () => {
  await fetch(`${sb.httpUrl}/_sandbox/requests`, { method: 'DELETE' });
  await fetch(`${sb.httpUrl}/_sandbox/mode`, { method: 'DELETE' });
});

const provA = (model: string, body: unknown, key = 'sandbox-key-a1') =>
  fetch(`${sb.httpUrl}/provA/v1beta/models/${model}:generateContent`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-goog-api-key': key },
    body: JSON.stringify(body),
  });
const provB = (body: unknown, key = 'sandbox-key-b1') =>
  fetch(`${sb.httpUrl}/provB/v1/images/generations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
const requests = async () => (await (await fetch(`${sb.httpUrl}/_sandbox/requests`)).json()).requests as any[];

describe('provA protocol', () => {
  it('renders an image with the dimensions of ratio and tier and records the request', async () => {
    const res = await provA('pro-image', {
      contents: [{ role: 'user', parts: [{ text: 'a red fox' }] }],
      systemInstruction: { parts: [{ text: 'be bold' }] },
      generationConfig: { responseModalities: ['TEXT', 'IMAGE'], imageConfig: { aspectRatio: '16:9', imageSize: '2K' } },
      tools: [{ googleSearch: {} }],
    });
    expect(res.status).toBe(200);
    const body = await res.json();
    const part = body.candidates[0].content.parts.find((p: any) => p.inlineData);
    expect(part.inlineData.mimeType).toBe('image/png');
    const meta = await sharp(Buffer.from(part.inlineData.data, 'base64')).metadata();
    expect([meta.width, meta.height, meta.format]).toEqual([2752, 1536, 'png']);
    const [rec] = await requests();
    expect(rec).toMatchObject({
      provider: 'provA',
      model: 'pro-image',
      apiKey: 'sandbox-key-a1',
      prompt: 'a red fox',
      systemInstruction: 'be bold',
      aspectRatio: '16:9',
      imageSize: '2K',
      tools: ['googleSearch'],
      imageInputs: 0,
      status: 200,
      imagesReturned: 1,
    });
  });

  it('is deterministic', async () => {
    const body = { contents: [{ parts: [{ text: 'same words' }] }] };
    const a = await (await provA('m', body)).json();
    const b = await (await provA('m', body)).json();
    expect(a.candidates[0].content.parts[1].inlineData.data).toBe(b.candidates[0].content.parts[1].inlineData.data);
  });

  it('counts inline image inputs', async () => {
    const png = await sharp({ create: { width: 64, height: 32, channels: 3, background: '#f00' } })
      .png()
      .toBuffer();
    const res = await provA('m', {
      contents: [{ parts: [{ text: 'edit it' }, { inlineData: { mimeType: 'image/png', data: png.toString('base64') } }] }],
    });
    expect(res.status).toBe(200);
    expect((await requests())[0]).toMatchObject({ imageInputs: 1, imageInputMimeTypes: ['image/png'] });
  });

  it('answers key failures, safety blocks, forced failures and unknown ratios like the upstream', async () => {
    const text = (t: string) => ({ contents: [{ parts: [{ text: t }] }] });
    let res = await provA('m', text('x'), 'bad-key');
    expect(res.status).toBe(401);
    expect((await res.json()).error.status).toBe('UNAUTHENTICATED');
    res = await provA('m', text('x'), 'quota-key');
    expect(res.status).toBe(429);
    res = await provA('m', text('x [[safety]]'));
    expect(res.status).toBe(200);
    expect((await res.json()).promptFeedback.blockReason).toBe('SAFETY');
    res = await provA('m', text('x [[image-safety]]'));
    expect((await res.json()).candidates[0].finishReason).toBe('IMAGE_SAFETY');
    res = await provA('m', text('x [[fail]]'));
    expect(res.status).toBe(500);
    res = await provA('m', { ...text('x'), generationConfig: { imageConfig: { aspectRatio: '7:3' } } });
    expect(res.status).toBe(400);
    await fetch(`${sb.httpUrl}/_sandbox/mode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ provider: 'provA', failNext: 2, status: 503 }),
    });
    expect((await provA('m', text('x'))).status).toBe(503);
    expect((await provA('m', text('x'))).status).toBe(503);
    expect((await provA('m', text('x'))).status).toBe(200);
    const recs = await requests();
    expect(recs.map((r) => r.status)).toEqual([401, 429, 200, 200, 500, 400, 503, 503, 200]);
  });
});

describe('provB protocol', () => {
  it('generates n images in the requested size and format', async () => {
    const res = await provB({
      model: 'image-2',
      prompt: 'blue whale',
      n: 2,
      size: '1536x1024',
      output_format: 'jpeg',
      output_compression: 80,
      quality: 'high',
    });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.data).toHaveLength(2);
    const meta = await sharp(Buffer.from(body.data[0].b64_json, 'base64')).metadata();
    expect([meta.width, meta.height, meta.format]).toEqual([1536, 1024, 'jpeg']);
    expect(body.data[0].b64_json).not.toBe(body.data[1].b64_json);
    expect((await requests())[0]).toMatchObject({
      provider: 'provB',
      endpoint: 'generations',
      n: 2,
      size: '1536x1024',
      outputFormat: 'jpeg',
      outputCompression: 80,
      quality: 'high',
    });
  });

  it('renders transparent webp', async () => {
    const res = await provB({ model: 'image-2.5-flare', prompt: 'logo', background: 'transparent', output_format: 'webp' });
    const body = await res.json();
    const meta = await sharp(Buffer.from(body.data[0].b64_json, 'base64')).metadata();
    expect(meta.format).toBe('webp');
    expect(meta.hasAlpha).toBe(true);
  });

  it('accepts multipart edits with image[] files', async () => {
    const png = await sharp({ create: { width: 300, height: 200, channels: 3, background: '#0f0' } })
      .png()
      .toBuffer();
    const form = new FormData();
    form.set('model', 'image-2');
    form.set('prompt', 'add a hat');
    form.append('image[]', new Blob([png], { type: 'image/png' }), 'a.png');
    form.append('image[]', new Blob([png], { type: 'image/png' }), 'b.png');
    const res = await fetch(`${sb.httpUrl}/provB/v1/images/edits`, { method: 'POST', headers: { authorization: 'Bearer k' }, body: form });
    expect(res.status).toBe(200);
    const body = await res.json();
    const meta = await sharp(Buffer.from(body.data[0].b64_json, 'base64')).metadata();
    expect([meta.width, meta.height]).toEqual([1536, 1024]);
    expect((await requests())[0]).toMatchObject({ endpoint: 'edits', imageInputs: 2, prompt: 'add a hat' });
  });

  it('refuses bad sizes, bad keys and unsafe prompts with the upstream error shape', async () => {
    let res = await provB({ model: 'image-2', prompt: 'x', size: '1000x1000' });
    expect(res.status).toBe(400);
    expect((await res.json()).error.param).toBe('size');
    res = await provB({ model: 'image-2', prompt: 'x' }, 'bad-1');
    expect(res.status).toBe(401);
    expect((await res.json()).error.code).toBe('invalid_api_key');
    res = await provB({ model: 'image-2', prompt: 'x' }, 'quota-1');
    expect(res.status).toBe(429);
    res = await provB({ model: 'image-2', prompt: 'x [[safety]]' });
    expect(res.status).toBe(400);
    expect((await res.json()).error.code).toBe('moderation_blocked');
    res = await provB({ model: 'image-2', prompt: 'x', background: 'transparent', output_format: 'jpeg' });
    expect(res.status).toBe(400);
  });
});

describe('upstream refusal shapes', () => {
  const text = (t: string, generationConfig?: unknown) => ({ contents: [{ parts: [{ text: t }] }], generationConfig });

  it('provA: an invalid key is 400 INVALID_ARGUMENT with ErrorInfo API_KEY_INVALID, like the real upstream', async () => {
    const res = await provA('m', text('x'), 'invalid-key');
    expect(res.status).toBe(400);
    const err = (await res.json()).error;
    expect(err).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT', message: 'API key not valid. Please pass a valid API key.' });
    expect(err.details).toEqual([
      expect.objectContaining({ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID' }),
    ]);
  });

  it('provA: 429 RESOURCE_EXHAUSTED names the quota (QuotaFailure) and the wait (RetryInfo)', async () => {
    for (const [key, quotaId, delay] of [
      ['quota-1', 'GenerateRequestsPerDayPerProjectPerModel', '3600s'],
      ['ratelimit-1', 'GenerateRequestsPerMinutePerProjectPerModel', '17s'],
    ]) {
      const res = await provA('m', text('x'), key);
      expect(res.status).toBe(429);
      const err = (await res.json()).error;
      expect(err.status).toBe('RESOURCE_EXHAUSTED');
      const byType = Object.fromEntries((err.details as any[]).map((d) => [d['@type'].split('.').pop(), d]));
      expect(byType.QuotaFailure.violations[0].quotaId).toBe(quotaId);
      expect(byType.RetryInfo.retryDelay).toBe(delay);
    }
  });

  it('provA: only the requested response modalities come back', async () => {
    const body = await (await provA('m', text('fox', { responseModalities: ['IMAGE'] }))).json();
    expect(body.candidates[0].content.parts.map((p: any) => Object.keys(p)[0])).toEqual(['inlineData']);
  });

  it('provB: rate limits carry Retry-After; a billing hard limit is a 400 with its own code', async () => {
    let res = await provB({ model: 'image-2', prompt: 'x' }, 'ratelimit-1');
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('20');
    expect((await res.json()).error).toMatchObject({ type: 'requests', code: 'rate_limit_exceeded' });
    res = await provB({ model: 'image-2', prompt: 'x' }, 'quota-1');
    expect((await res.json()).error.code).toBe('insufficient_quota');
    res = await provB({ model: 'image-2', prompt: 'x' }, 'billing-1');
    expect(res.status).toBe(400);
    expect((await res.json()).error.code).toBe('billing_hard_limit_reached');
  });

  it('both: [[html-error:N]] answers an HTML error page like a proxy in front of the upstream', async () => {
    for (const res of [await provA('m', text('x [[html-error:502]]')), await provB({ model: 'image-2', prompt: 'x [[html-error:503]]' })]) {
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(await res.text()).toMatch(/^<html>[\s\S]*<title>50[23] (Bad Gateway|Service Temporarily Unavailable)<\/title>/);
    }
    expect((await requests()).map((r) => r.status)).toEqual([502, 503]);
  });
});
