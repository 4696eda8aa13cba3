import { PROVA_IMAGE_SIZE } from '../models.js';
import {
  decodeBase64,
  MAX_RESPONSE_BYTES,
  type ProviderAdapter,
  ProviderError,
  type ProviderRequest,
  type ProviderResult,
  postUpstream,
  retryAfterHeader,
  type UpstreamAnswer,
  type UpstreamBody,
} from './types.js';

/** finishReason / blockReason values that mean the content was blocked by a safety filter. */
const SAFETY_REASONS = new Set([
  'SAFETY',
  'IMAGE_SAFETY',
  'PROHIBITED_CONTENT',
  'IMAGE_PROHIBITED_CONTENT',
  'BLOCKLIST',
  'SPII',
  'OTHER_SAFETY',
  // Recitation (the answer would reproduce protected material) is a content refusal as well.
  'RECITATION',
  'IMAGE_RECITATION',
]);

/** ErrorInfo reasons of a rejected key (Gemini answers an invalid key with 400 INVALID_ARGUMENT + API_KEY_INVALID). */
const KEY_REASONS = new Set(['API_KEY_INVALID', 'API_KEY_MISSING', 'API_KEY_EXPIRED', 'API_KEY_SERVICE_BLOCKED', 'CONSUMER_SUSPENDED']);

/**
 * provA: a Gemini-style `generateContent` JSON API. POST {base}/v1beta/models/{model}:generateContent
 * with the key in `x-goog-api-key`; text and inline base64 image parts in, inline image parts out;
 * aspect ratio and size tier in generationConfig.imageConfig; optional system instruction, thinking
 * config and the googleSearch tool. One picture per call.
 */
export class ProvAAdapter implements ProviderAdapter {
  readonly provider = 'provA' as const;

  constructor(
    private readonly baseUrl: () => string,
    private readonly opts: { maxResponseBytes?: number } = {},
  ) {}

  buildBody(req: ProviderRequest): Record<string, unknown> {
    const parts: Record<string, unknown>[] = [{ text: req.prompt }];
    for (const img of req.images) parts.push({ inlineData: { mimeType: img.mimeType, data: img.data.toString('base64') } });
    const imageConfig: Record<string, string> = { aspectRatio: req.aspectRatio };
    if (req.tier) imageConfig.imageSize = PROVA_IMAGE_SIZE[req.tier] ?? req.tier;
    const generationConfig: Record<string, unknown> = { responseModalities: ['TEXT', 'IMAGE'], imageConfig };
    if (req.thinking) generationConfig.thinkingConfig = { includeThoughts: false, thinkingLevel: 'high' };
    const body: Record<string, unknown> = { contents: [{ role: 'user', parts }], generationConfig };
    if (req.systemInstruction) body.systemInstruction = { parts: [{ text: req.systemInstruction }] };
    if (req.search) body.tools = [{ googleSearch: {} }];
    return body;
  }

  async call(req: ProviderRequest, apiKey: string, signal: AbortSignal): Promise<ProviderResult> {
    const base = this.baseUrl().replace(/\/+$/, '');
    // Model names may be configured in resource form ("models/x"); the path wants the bare id.
    const model = req.model.replace(/^models\//, '');
    const res = await postUpstream(
      `${base}/v1beta/models/${encodeURIComponent(model)}:generateContent`,
      { headers: { 'content-type': 'application/json', 'x-goog-api-key': apiKey }, body: JSON.stringify(this.buildBody(req)), signal },
      'provA',
      this.opts.maxResponseBytes ?? MAX_RESPONSE_BYTES,
    );
    const body = res.body;
    if (!res.ok) throw classify(res.status, body, res.header);
    if (!body.json || typeof body.json !== 'object') {
      throw new ProviderError('server', `provA answered ${res.status} without a JSON body: ${body.summary ?? 'empty body'}`, res.status);
    }
    return parseResponse(body.json);
  }
}

/** google.rpc RetryInfo.retryDelay ("38s", "1.5s") in whole seconds. */
function retryDelay(details: any[]): number | undefined {
  for (const d of details) {
    const m = /^(\d+(?:\.\d+)?)s$/.exec(String(d?.retryDelay ?? ''));
    if (m) return Math.max(1, Math.ceil(Number(m[1])));
  }
  return undefined;
}

function classify(status: number, body: UpstreamBody, header: UpstreamAnswer['header']): ProviderError {
  const err = body.json?.error ?? {};
  const message: string = typeof err.message === 'string' ? err.message : (body.summary ?? `HTTP ${status}`);
  const details: any[] = Array.isArray(err.details) ? err.details : [];
  const reasons: string[] = details.map((d) => String(d?.reason ?? '')).filter(Boolean);
  const text = `provA answered ${status}${err.status ? ` ${err.status}` : ''}: ${message}`;
  if (status === 401 || status === 403 || reasons.some((r) => KEY_REASONS.has(r)) || /API key (not valid|expired|invalid)/i.test(message)) {
    return new ProviderError('auth', text, status);
  }
  if (status === 429) {
    // QuotaFailure violations name the quota: per-minute ones are rate limits, per-day ones the quota.
    const quotaIds: string[] = details.flatMap((d) => ((d?.violations ?? []) as any[]).map((v) => String(v?.quotaId ?? '')));
    const perMinute = quotaIds.some((q) => /PerMinute|PerSecond/i.test(q));
    const perDay = quotaIds.some((q) => /PerDay|PerMonth/i.test(q));
    const rate = perMinute || (!perDay && (reasons.includes('RATE_LIMIT_EXCEEDED') || /rate limit|too many requests/i.test(message)));
    return new ProviderError(rate ? 'rate_limit' : 'quota', text, status, undefined, retryDelay(details) ?? retryAfterHeader(header));
  }
  if (status === 408 || status >= 500) return new ProviderError('server', text, status);
  return new ProviderError('bad_request', text, status);
}

function parseResponse(json: any): ProviderResult {
  const tokens = Number(json?.usageMetadata?.totalTokenCount ?? 0) || 0;
  const block = json?.promptFeedback?.blockReason;
  if (block) {
    const detail = json.promptFeedback.blockReasonMessage;
    throw new ProviderError('safety', `provA blocked the prompt: ${block}`, 200, detail ? `${block} (${detail})` : String(block));
  }
  const images: ProviderResult['images'] = [];
  const texts: string[] = [];
  const candidates: any[] = Array.isArray(json?.candidates) ? json.candidates : [];
  // A safety finishReason on any candidate wins over another candidate's STOP (all candidates are searched for pictures).
  const blocked = candidates.find((c) => SAFETY_REASONS.has(String(c?.finishReason)));
  const finishReason: string | undefined = (blocked ?? candidates[0])?.finishReason;
  const finishMessage: string | undefined = (blocked ?? candidates[0])?.finishMessage;
  for (const cand of candidates) {
    for (const p of (cand?.content?.parts ?? []) as any[]) {
      if (p?.thought) continue; // interim "thinking" pictures and text are not the answer
      const inline = p?.inlineData ?? p?.inline_data;
      const mimeType = String(inline?.mimeType ?? inline?.mime_type ?? 'image/png');
      if (typeof inline?.data === 'string' && inline.data && mimeType.startsWith('image/')) {
        images.push({ data: decodeBase64(inline.data, 'provA'), mimeType });
      } else if (typeof p?.text === 'string') texts.push(p.text);
    }
  }
  if (images.length === 0) {
    if (finishReason && SAFETY_REASONS.has(finishReason)) {
      throw new ProviderError(
        'safety',
        `provA blocked the image: ${finishReason}`,
        200,
        finishMessage ? `${finishReason} (${finishMessage})` : finishReason,
      );
    }
    const said = texts.join(' ').trim();
    throw new ProviderError(
      'no_image',
      `provA returned no image${finishReason ? ` (finishReason ${finishReason})` : ''}${said ? `: ${said.slice(0, 300)}` : ''}`,
    );
  }
  return { images, tokens, text: texts.join('\n') || undefined };
}
