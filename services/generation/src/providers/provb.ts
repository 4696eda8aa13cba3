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

const MIME: Record<string, string> = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' };
const EXT: Record<string, string> = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/webp': 'webp', 'image/gif': 'gif' };

/**
 * provB: an images API. POST {base}/v1/images/generations (JSON) or, with image inputs,
 * /v1/images/edits (multipart, files under image[]); bearer key; model, prompt, n, size, quality,
 * output_format, output_compression, background, moderation; base64 pictures out (data[].b64_json).
 */
export class ProvBAdapter implements ProviderAdapter {
  readonly provider = 'provB' as const;

  constructor(
    private readonly baseUrl: () => string,
    private readonly opts: { maxResponseBytes?: number } = {},
  ) {}

  fields(req: ProviderRequest): Record<string, string | number> {
    const f: Record<string, string | number> = { model: req.model, prompt: req.prompt, n: req.n };
    if (req.size) f.size = req.size;
    if (req.quality) f.quality = req.quality;
    if (req.outputFormat) f.output_format = req.outputFormat;
    if (req.outputCompression !== undefined) f.output_compression = req.outputCompression;
    if (req.background) f.background = req.background;
    if (req.moderation) f.moderation = req.moderation;
    return f;
  }

  async call(req: ProviderRequest, apiKey: string, signal: AbortSignal): Promise<ProviderResult> {
    const base = this.baseUrl().replace(/\/+$/, '');
    const fields = this.fields(req);
    const url = `${base}/v1/images/${req.images.length === 0 ? 'generations' : 'edits'}`;
    let init: Parameters<typeof postUpstream>[1];
    if (req.images.length === 0) {
      init = { headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` }, body: JSON.stringify(fields), signal };
    } else {
      const form = new FormData();
      for (const [k, v] of Object.entries(fields)) form.set(k, String(v));
      req.images.forEach((img, i) => {
        form.append(
          'image[]',
          new Blob([new Uint8Array(img.data)], { type: img.mimeType }),
          `image-${i + 1}.${EXT[img.mimeType] ?? 'png'}`,
        );
      });
      init = { headers: { authorization: `Bearer ${apiKey}` }, body: form, signal };
    }
    const res = await postUpstream(url, init, 'provB', this.opts.maxResponseBytes ?? MAX_RESPONSE_BYTES);
    const body = res.body;
    if (!res.ok) throw classify(res.status, body, res.header);
    const json = body.json;
    if (!json || typeof json !== 'object') {
      throw new ProviderError('server', `provB answered ${res.status} without a JSON body: ${body.summary ?? 'empty body'}`, res.status);
    }
    const mimeType = MIME[String(json?.output_format ?? req.outputFormat ?? 'png')] ?? 'image/png';
    const images = ((json?.data ?? []) as any[])
      .filter((d) => typeof d?.b64_json === 'string')
      .map((d) => ({ data: decodeBase64(d.b64_json, 'provB'), mimeType }));
    if (images.length === 0) throw new ProviderError('no_image', 'provB returned no image');
    return { images, tokens: Number(json?.usage?.total_tokens ?? 0) || 0 };
  }
}

/** Error codes of an account that has run out of money (a 400 for the hard billing limit, 429 otherwise). */
const QUOTA_CODES = new Set(['insufficient_quota', 'billing_hard_limit_reached', 'billing_not_active']);

function classify(status: number, body: UpstreamBody, header: UpstreamAnswer['header']): ProviderError {
  const err = body.json?.error ?? {};
  const message: string = typeof err.message === 'string' ? err.message : (body.summary ?? `HTTP ${status}`);
  const code = String(err.code ?? '');
  const type = String(err.type ?? '');
  const text = `provB answered ${status}: ${message}`;
  if (status === 401 || status === 403 || code === 'invalid_api_key') return new ProviderError('auth', text, status);
  if (QUOTA_CODES.has(code) || QUOTA_CODES.has(type)) return new ProviderError('quota', text, status, undefined, retryAfterHeader(header));
  if (status === 429) {
    const quota = /quota|billing/i.test(message);
    return new ProviderError(quota ? 'quota' : 'rate_limit', text, status, undefined, retryAfterHeader(header));
  }
  if (
    code === 'moderation_blocked' ||
    code === 'content_policy_violation' ||
    (type === 'image_generation_user_error' && /safety/i.test(message))
  ) {
    return new ProviderError('safety', text, status, message);
  }
  if (status === 408 || status >= 500) return new ProviderError('server', text, status);
  return new ProviderError('bad_request', text, status);
}
