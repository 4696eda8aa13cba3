import { PROVA_IMAGE_SIZE } from '../models.js';
import { type ProviderAdapter, ProviderError, type ProviderRequest, type ProviderResult, readJson } from './types.js';

/** finishReason / blockReason values that mean the content was blocked by a safety filter. */
const SAFETY_REASONS = new Set([
  'SAFETY',
  'IMAGE_SAFETY',
  'PROHIBITED_CONTENT',
  'IMAGE_PROHIBITED_CONTENT',
  'BLOCKLIST',
  'SPII',
  'OTHER_SAFETY',
]);

/**
 * provA: a Gemini-style `generateContent` JSON API. POST {base}/v1beta/models/{model}:generateContent
 * with the key in `x-goog-api-key`; text and inline base64 image parts in, inline image parts out;
 * aspect ratio and size tier in generationConfig.imageConfig; optional system instruction, thinking
 * config and the googleSearch tool. One picture per call.
 */
export class ProvAAdapter implements ProviderAdapter {
  readonly provider = 'provA' as const;

  constructor(private readonly baseUrl: () => string) {}

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
    const res = await fetch(`${base}/v1beta/models/${encodeURIComponent(req.model)}:generateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': apiKey },
      body: JSON.stringify(this.buildBody(req)),
      signal,
    });
    const json = await readJson(res);
    if (!res.ok) throw classify(res.status, json);
    return parseResponse(json);
  }
}

function classify(status: number, json: any): ProviderError {
  const err = json?.error ?? {};
  const message: string = err.message ?? json?.raw ?? `HTTP ${status}`;
  const reasons: string[] = ((err.details ?? []) as any[]).map((d) => String(d?.reason ?? '')).filter(Boolean);
  const text = `provA answered ${status}: ${message}`;
  if (status === 401 || status === 403 || reasons.includes('API_KEY_INVALID') || reasons.includes('API_KEY_MISSING')) {
    return new ProviderError('auth', text, status);
  }
  if (status === 429) {
    const rate = reasons.includes('RATE_LIMIT_EXCEEDED') || /rate/i.test(message);
    return new ProviderError(rate ? 'rate_limit' : 'quota', text, status);
  }
  if (status >= 500) return new ProviderError('server', text, status);
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
  let finishReason: string | undefined;
  let finishMessage: string | undefined;
  for (const cand of (json?.candidates ?? []) as any[]) {
    finishReason ??= cand?.finishReason;
    finishMessage ??= cand?.finishMessage;
    for (const p of (cand?.content?.parts ?? []) as any[]) {
      const inline = p?.inlineData ?? p?.inline_data;
      if (inline?.data && !p.thought) {
        images.push({ data: Buffer.from(inline.data, 'base64'), mimeType: inline.mimeType ?? inline.mime_type ?? 'image/png' });
      } else if (typeof p?.text === 'string' && !p.thought) texts.push(p.text);
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
