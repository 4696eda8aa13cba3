import multipart from '@fastify/multipart';
import type { ServiceContext } from '@imagegen/platform';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import sharp from 'sharp';
import { type OutputFormat, provADimensions, provBSizeProblem, renderImage, visibleText } from './render.js';

type Logger = ServiceContext['logger'];

export type SandboxProvider = 'provA' | 'provB';

/** One request as the sandbox received it (base64 payloads replaced by their sizes). */
export interface RecordedRequest {
  id: number;
  at: string;
  provider: SandboxProvider;
  endpoint: 'generateContent' | 'generations' | 'edits';
  path: string;
  /** Upstream model name as sent. */
  model: string;
  apiKey: string | null;
  /** All text parts (provA) or the prompt field (provB), joined with '\n'. */
  prompt: string;
  systemInstruction: string | null;
  imageInputs: number;
  imageInputMimeTypes: string[];
  /** provA */
  aspectRatio: string | null;
  imageSize: string | null;
  responseModalities: string[] | null;
  tools: string[];
  thinkingConfig: unknown;
  /** provB */
  n: number | null;
  size: string | null;
  quality: string | null;
  outputFormat: string | null;
  outputCompression: number | null;
  background: string | null;
  moderation: string | null;
  /** Outcome */
  status: number;
  error: string | null;
  imagesReturned: number;
  width: number | null;
  height: number | null;
  /** The request body with base64 data replaced by '<N base64 chars>'. */
  body: unknown;
}

export interface ProviderMode {
  /** Answer the next `failNext` requests with `status` (default 500). */
  failNext: number;
  status: number;
  /** Delay every request by this many ms. */
  delayMs: number;
  /** Answer the next `safetyNext` requests with a safety block. */
  safetyNext: number;
}

const freshMode = (): ProviderMode => ({ failNext: 0, status: 500, delayMs: 0, safetyNext: 0 });

export interface SandboxState {
  requests: RecordedRequest[];
  modes: Record<SandboxProvider, ProviderMode>;
  seq: number;
}

const MAX_RECORDED = 2000;

export const PROVA_SAFETY_REASON = 'SAFETY';
export const PROVB_SAFETY_MESSAGE =
  'Your request was rejected by the safety system. It may contain content that is not allowed by the safety system.';

class UpstreamError extends Error {
  constructor(
    readonly status: number,
    /** JSON error body, or a string sent as text/html (a proxy's error page). */
    readonly body: unknown,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

// ---- provA (Gemini-style) error bodies ----
const provAStatusName: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};
const provAError = (status: number, message: string, reason?: string, details?: unknown[]) =>
  new UpstreamError(
    status,
    {
      error: {
        code: status,
        message,
        status: provAStatusName[status] ?? 'UNKNOWN',
        ...(details
          ? { details }
          : reason
            ? {
                details: [
                  {
                    '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
                    reason,
                    domain: 'googleapis.com',
                    metadata: { service: 'sandbox' },
                  },
                ],
              }
            : {}),
      },
    },
    message,
  );

/** The upstream's 429: QuotaFailure naming the exhausted quota (per minute or per day) plus RetryInfo. */
export const PROVA_QUOTA_MESSAGE =
  'You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.';
export const PROVA_RETRY_DELAY_S = { quota: 3600, rate: 17 };
const provAQuota = (perDay: boolean) =>
  provAError(429, PROVA_QUOTA_MESSAGE, undefined, [
    {
      '@type': 'type.googleapis.com/google.rpc.QuotaFailure',
      violations: [
        {
          quotaMetric: 'generativelanguage.googleapis.com/generate_content_requests',
          quotaId: perDay ? 'GenerateRequestsPerDayPerProjectPerModel' : 'GenerateRequestsPerMinutePerProjectPerModel',
          quotaDimensions: { location: 'global' },
        },
      ],
    },
    {
      '@type': 'type.googleapis.com/google.rpc.Help',
      links: [{ description: 'Learn more', url: 'https://ai.google.dev/gemini-api/docs/rate-limits' }],
    },
    {
      '@type': 'type.googleapis.com/google.rpc.RetryInfo',
      retryDelay: `${perDay ? PROVA_RETRY_DELAY_S.quota : PROVA_RETRY_DELAY_S.rate}s`,
    },
  ]);

/** What a load balancer in front of either upstream answers when the backend is down: HTML, not JSON. */
const HTML_STATUS: Record<number, string> = {
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Temporarily Unavailable',
  504: 'Gateway Time-out',
};
const htmlError = (status: number) =>
  new UpstreamError(
    status,
    `<html>\r\n<head><title>${status} ${HTML_STATUS[status] ?? 'Error'}</title></head>\r\n<body>\r\n<center><h1>${status} ${HTML_STATUS[status] ?? 'Error'}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n`,
    `${status} (HTML error page)`,
  );

// ---- provB (images-API-style) error bodies ----
const provBError = (
  status: number,
  message: string,
  type: string,
  code: string | null,
  param: string | null = null,
  headers: Record<string, string> = {},
) => new UpstreamError(status, { error: { message, type, param, code } }, message, headers);
export const PROVB_RETRY_AFTER_S = 20;

function directives(prompt: string): { fail?: number; safety?: string; delayMs?: number; textOnly?: boolean; htmlError?: number } {
  const out: ReturnType<typeof directives> = {};
  for (const m of prompt.matchAll(/\[\[([a-z-]+)(?::([^\]]*))?\]\]/gi)) {
    const [, name, arg] = m;
    switch (name.toLowerCase()) {
      case 'fail':
        out.fail = arg && /^\d{3}$/.test(arg) ? Number(arg) : 500;
        break;
      case 'safety':
        out.safety = arg || 'prompt';
        break;
      case 'image-safety':
        out.safety = 'image';
        break;
      case 'delay':
        out.delayMs = Math.min(600_000, Math.max(0, Number(arg) || 0));
        break;
      case 'text-only':
        out.textOnly = true;
        break;
      case 'html-error':
        out.htmlError = arg && /^\d{3}$/.test(arg) ? Number(arg) : 502;
        break;
    }
  }
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Text the real upstreams refuse with a 400: C0 control characters other than tab, line feed and carriage
 * return (NUL among them) and unpaired UTF-16 surrogates. Rendering such text (SVG/XML) would fail, which
 * the sandbox used to answer with a 500, a fault of its own that opened the caller's circuit breaker.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const INVALID_TEXT = /[\u0000-\u0008\u000B\u000C\u000E-\u001F]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Replaces long base64 strings by a size marker so recorded bodies stay small. */
function redact(v: unknown): unknown {
  if (typeof v === 'string') return v.length > 512 ? `<${v.length} base64 chars>` : v;
  if (Array.isArray(v)) return v.map(redact);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, redact(x)]));
  return v;
}

function newRecord(state: SandboxState, provider: SandboxProvider, endpoint: RecordedRequest['endpoint'], path: string): RecordedRequest {
  const r: RecordedRequest = {
    id: ++state.seq,
    at: new Date().toISOString(),
    provider,
    endpoint,
    path,
    model: '',
    apiKey: null,
    prompt: '',
    systemInstruction: null,
    imageInputs: 0,
    imageInputMimeTypes: [],
    aspectRatio: null,
    imageSize: null,
    responseModalities: null,
    tools: [],
    thinkingConfig: null,
    n: null,
    size: null,
    quality: null,
    outputFormat: null,
    outputCompression: null,
    background: null,
    moderation: null,
    status: 0,
    error: null,
    imagesReturned: 0,
    width: null,
    height: null,
    body: null,
  };
  state.requests.push(r);
  if (state.requests.length > MAX_RECORDED) state.requests.splice(0, state.requests.length - MAX_RECORDED);
  return r;
}

/**
 * Key conventions shared by both providers: bad-* 401, forbidden-* 403, quota-* 429 (quota), ratelimit-* 429.
 * provA also: invalid-* 400 INVALID_ARGUMENT + ErrorInfo API_KEY_INVALID (how the real upstream refuses a wrong
 * key). provB also: billing-* 400 billing_hard_limit_reached. Rate limits carry the upstream's wait hint
 * (provA RetryInfo.retryDelay, provB Retry-After header).
 */
function keyFailure(provider: SandboxProvider, key: string | null): UpstreamError | undefined {
  if (provider === 'provA') {
    if (!key) return provAError(401, "Method doesn't allow unregistered callers. Please use an API key.", 'API_KEY_MISSING');
    if (key.startsWith('bad-')) return provAError(401, 'API key not valid. Please pass a valid API key.', 'API_KEY_INVALID');
    if (key.startsWith('invalid-')) return provAError(400, 'API key not valid. Please pass a valid API key.', 'API_KEY_INVALID');
    if (key.startsWith('forbidden-')) return provAError(403, 'Permission denied: the API key cannot use this model.', 'PERMISSION_DENIED');
    if (key.startsWith('quota-')) return provAQuota(true);
    if (key.startsWith('ratelimit-')) return provAQuota(false);
    return undefined;
  }
  if (!key) return provBError(401, 'Missing bearer authentication in header', 'invalid_request_error', null);
  if (key.startsWith('bad-'))
    return provBError(401, `Incorrect API key provided: ${key.slice(0, 8)}****.`, 'invalid_request_error', 'invalid_api_key');
  if (key.startsWith('forbidden-'))
    return provBError(403, 'You are not allowed to use this model.', 'invalid_request_error', 'model_not_allowed');
  if (key.startsWith('quota-'))
    return provBError(
      429,
      'You exceeded your current quota, please check your plan and billing details.',
      'insufficient_quota',
      'insufficient_quota',
    );
  if (key.startsWith('billing-'))
    return provBError(400, 'Billing hard limit has been reached', 'invalid_request_error', 'billing_hard_limit_reached');
  if (key.startsWith('ratelimit-'))
    return provBError(
      429,
      `Rate limit reached for images per min (IPM): Limit 5, Used 5, Requested 1. Please try again in ${PROVB_RETRY_AFTER_S}s.`,
      'requests',
      'rate_limit_exceeded',
      null,
      { 'retry-after': String(PROVB_RETRY_AFTER_S), 'x-ratelimit-reset-requests': `${PROVB_RETRY_AFTER_S}s` },
    );
  return undefined;
}

function forcedFailure(provider: SandboxProvider, status: number): UpstreamError {
  if (provider === 'provA') return provAError(status, status >= 500 ? 'Internal error encountered.' : `Sandbox forced status ${status}`);
  return provBError(
    status,
    status >= 500 ? 'The server had an error while processing your request.' : `Sandbox forced status ${status}`,
    status >= 500 ? 'server_error' : 'invalid_request_error',
    null,
  );
}

function provBSafety(): UpstreamError {
  return provBError(400, PROVB_SAFETY_MESSAGE, 'image_generation_user_error', 'moderation_blocked');
}

/** Applies, in order: forced mode failures, the key conventions, prompt directives (fail, delay). */
async function preflight(state: SandboxState, provider: SandboxProvider, rec: RecordedRequest, prompt: string) {
  const mode = state.modes[provider];
  const d = directives(prompt);
  const delay = (d.delayMs ?? 0) + mode.delayMs;
  if (delay > 0) await sleep(delay);
  if (mode.failNext > 0) {
    mode.failNext--;
    throw forcedFailure(provider, mode.status);
  }
  const kf = keyFailure(provider, rec.apiKey);
  if (kf) throw kf;
  if (d.fail) throw forcedFailure(provider, d.fail);
  if (d.htmlError) throw htmlError(d.htmlError);
  let safety = d.safety;
  if (!safety && mode.safetyNext > 0) {
    mode.safetyNext--;
    safety = 'prompt';
  }
  return { safety, textOnly: !!d.textOnly };
}

function decodeImages(list: { mimeType: string; data: string }[]): Buffer[] {
  return list.map((x) => Buffer.from(x.data, 'base64'));
}

// ------------------------------------------------------------------------------------------------

async function handleProvA(state: SandboxState, req: FastifyRequest, reply: FastifyReply) {
  const path = req.url.split('?')[0];
  const rec = newRecord(state, 'provA', 'generateContent', path);
  try {
    const m = /\/v1beta\/models\/([^/:]+):generateContent$/.exec(path);
    if (!m) throw provAError(404, `Unknown method ${path}`);
    rec.model = decodeURIComponent(m[1]);
    const query = req.query as Record<string, string | undefined>;
    rec.apiKey = (req.headers['x-goog-api-key'] as string | undefined) ?? query.key ?? null;
    const body = (req.body ?? {}) as Record<string, any>;
    rec.body = redact(body);
    const texts: string[] = [];
    const images: { mimeType: string; data: string }[] = [];
    if (!Array.isArray(body.contents) || body.contents.length === 0)
      throw provAError(400, '* GenerateContentRequest.contents: contents is not specified');
    for (const c of body.contents) {
      for (const p of (c?.parts ?? []) as any[]) {
        if (typeof p?.text === 'string') texts.push(p.text);
        const inline = p?.inlineData ?? p?.inline_data;
        if (inline?.data) images.push({ mimeType: inline.mimeType ?? inline.mime_type ?? '', data: inline.data });
      }
    }
    rec.prompt = texts.join('\n');
    rec.imageInputs = images.length;
    rec.imageInputMimeTypes = images.map((i) => i.mimeType);
    const sys = body.systemInstruction ?? body.system_instruction;
    rec.systemInstruction = sys ? ((sys.parts ?? []) as any[]).map((p) => p.text ?? '').join('\n') : null;
    const gc = body.generationConfig ?? body.generation_config ?? {};
    const ic = gc.imageConfig ?? gc.image_config ?? {};
    rec.aspectRatio = ic.aspectRatio ?? ic.aspect_ratio ?? null;
    rec.imageSize = ic.imageSize ?? ic.image_size ?? null;
    rec.responseModalities = gc.responseModalities ?? gc.response_modalities ?? null;
    rec.thinkingConfig = gc.thinkingConfig ?? gc.thinking_config ?? null;
    rec.tools = ((body.tools ?? []) as any[]).flatMap((t) => Object.keys(t ?? {}));

    const { safety, textOnly } = await preflight(state, 'provA', rec, rec.prompt);
    if (INVALID_TEXT.test(rec.prompt) || INVALID_TEXT.test(rec.systemInstruction ?? ''))
      throw provAError(400, 'Request contains an invalid argument: text parts must be valid UTF-8 without control characters.');
    if (texts.length === 0 && images.length === 0)
      throw provAError(400, '* GenerateContentRequest.contents[0].parts: contents.parts must not be empty');
    const dims = provADimensions(rec.aspectRatio ?? '1:1', rec.imageSize ?? '1K');
    if (!dims) throw provAError(400, `Unsupported image config: aspectRatio=${rec.aspectRatio} imageSize=${rec.imageSize}`);
    const usageMetadata = {
      promptTokenCount: Math.ceil(rec.prompt.length / 4) + images.length * 258,
      candidatesTokenCount: 1290,
      totalTokenCount: Math.ceil(rec.prompt.length / 4) + images.length * 258 + 1290,
    };
    if (safety === 'prompt' || safety === 'prohibited') {
      rec.status = 200;
      rec.error = `blocked: ${safety === 'prohibited' ? 'PROHIBITED_CONTENT' : PROVA_SAFETY_REASON}`;
      return reply.send({
        promptFeedback: { blockReason: safety === 'prohibited' ? 'PROHIBITED_CONTENT' : PROVA_SAFETY_REASON },
        usageMetadata,
        modelVersion: rec.model,
      });
    }
    if (safety) {
      rec.status = 200;
      rec.error = 'blocked: IMAGE_SAFETY';
      return reply.send({
        candidates: [
          {
            content: { role: 'model', parts: [] },
            finishReason: 'IMAGE_SAFETY',
            finishMessage: 'The generated image was blocked by the image safety filter.',
            index: 0,
          },
        ],
        usageMetadata,
        modelVersion: rec.model,
      });
    }
    const modalities = (rec.responseModalities ?? ['TEXT', 'IMAGE']).map((x) => String(x).toUpperCase());
    const withImage = !textOnly && modalities.includes('IMAGE');
    // Like the upstream: a text part only when TEXT is among the response modalities (or there is no picture).
    const parts: any[] =
      modalities.includes('TEXT') || !withImage ? [{ text: `Sandbox image for: ${visibleText(rec.prompt).slice(0, 200)}` }] : [];
    if (withImage) {
      const data = await renderImage({
        width: dims.width,
        height: dims.height,
        format: 'png',
        text: visibleText(rec.prompt),
        base: images.length ? decodeImages(images)[0] : undefined,
      });
      parts.push({ inlineData: { mimeType: 'image/png', data: data.toString('base64') } });
      rec.imagesReturned = 1;
      rec.width = dims.width;
      rec.height = dims.height;
    }
    rec.status = 200;
    return reply.send({
      candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }],
      usageMetadata,
      modelVersion: rec.model,
      responseId: `sandbox-${rec.id}`,
    });
  } catch (err) {
    return sendError(rec, reply, err);
  }
}

function sendError(rec: RecordedRequest, reply: FastifyReply, err: unknown) {
  if (err instanceof UpstreamError) {
    rec.status = err.status;
    rec.error = err.message;
    reply.status(err.status).headers(err.headers);
    if (typeof err.body === 'string') return reply.type('text/html').send(err.body);
    return reply.send(err.body);
  }
  rec.status = 500;
  rec.error = (err as Error)?.message ?? String(err);
  return reply
    .status(500)
    .send(
      rec.provider === 'provA'
        ? { error: { code: 500, message: 'Internal error encountered.', status: 'INTERNAL' } }
        : { error: { message: 'The server had an error while processing your request.', type: 'server_error', param: null, code: null } },
    );
}

const PROVB_QUALITY = ['low', 'medium', 'high', 'auto', 'xhigh', 'max'];
const PROVB_FORMATS = ['png', 'jpeg', 'webp'];

function provBDims(size: string | null, firstInput?: { width: number; height: number }): { width: number; height: number } {
  if (!size || size === 'auto') {
    if (firstInput) {
      const r = firstInput.width / firstInput.height;
      return r > 1.2 ? { width: 1536, height: 1024 } : r < 0.83 ? { width: 1024, height: 1536 } : { width: 1024, height: 1024 };
    }
    return { width: 1024, height: 1024 };
  }
  const m = /^(\d+)x(\d+)$/.exec(size);
  if (!m)
    throw provBError(
      400,
      `Invalid value: '${size}'. Supported values are: 'auto' or 'WIDTHxHEIGHT'.`,
      'invalid_request_error',
      'invalid_value',
      'size',
    );
  const width = Number(m[1]);
  const height = Number(m[2]);
  const problem = provBSizeProblem(width, height);
  if (problem) throw provBError(400, `Invalid size '${size}': ${problem}.`, 'invalid_request_error', 'invalid_value', 'size');
  return { width, height };
}

async function handleProvB(state: SandboxState, req: FastifyRequest, reply: FastifyReply, endpoint: 'generations' | 'edits') {
  const path = req.url.split('?')[0];
  const rec = newRecord(state, 'provB', endpoint, path);
  try {
    const auth = req.headers.authorization;
    rec.apiKey = auth?.startsWith('Bearer ') ? auth.slice(7).trim() : null;
    const fields: Record<string, string> = {};
    const images: { mimeType: string; data: Buffer }[] = [];
    if (endpoint === 'edits') {
      if (!req.isMultipart()) throw provBError(400, 'Edits expect multipart/form-data', 'invalid_request_error', null);
      for await (const part of req.parts()) {
        if (part.type === 'file') {
          const data = await part.toBuffer();
          if (part.fieldname === 'image' || part.fieldname === 'image[]') images.push({ mimeType: part.mimetype, data });
          else if (part.fieldname === 'mask') fields.mask = `<${data.length} bytes>`;
        } else {
          fields[part.fieldname] = String(part.value);
        }
      }
      rec.body = { ...fields, images: images.map((i) => `<${i.data.length} bytes ${i.mimeType}>`) };
    } else {
      const body = (req.body ?? {}) as Record<string, unknown>;
      rec.body = redact(body);
      for (const [k, v] of Object.entries(body))
        if (v !== undefined && v !== null) fields[k] = typeof v === 'string' ? v : JSON.stringify(v);
    }
    rec.model = fields.model ?? '';
    rec.prompt = fields.prompt ?? '';
    rec.imageInputs = images.length;
    rec.imageInputMimeTypes = images.map((i) => i.mimeType);
    rec.n = fields.n !== undefined ? Number(fields.n) : null;
    rec.size = fields.size ?? null;
    rec.quality = fields.quality ?? null;
    rec.outputFormat = fields.output_format ?? null;
    rec.outputCompression = fields.output_compression !== undefined ? Number(fields.output_compression) : null;
    rec.background = fields.background ?? null;
    rec.moderation = fields.moderation ?? null;

    const { safety } = await preflight(state, 'provB', rec, rec.prompt);
    if (INVALID_TEXT.test(rec.prompt))
      throw provBError(
        400,
        "Invalid 'prompt': the string contains invalid characters.",
        'invalid_request_error',
        'invalid_value',
        'prompt',
      );
    if (!rec.model)
      throw provBError(400, "Missing required parameter: 'model'.", 'invalid_request_error', 'missing_required_parameter', 'model');
    if (!rec.prompt)
      throw provBError(400, "Missing required parameter: 'prompt'.", 'invalid_request_error', 'missing_required_parameter', 'prompt');
    if (endpoint === 'edits' && images.length === 0)
      throw provBError(400, "Missing required parameter: 'image'.", 'invalid_request_error', 'missing_required_parameter', 'image');
    const n = rec.n ?? 1;
    if (!Number.isInteger(n) || n < 1 || n > 10)
      throw provBError(400, `Invalid 'n': must be between 1 and 10.`, 'invalid_request_error', 'invalid_value', 'n');
    const quality = rec.quality ?? 'auto';
    if (!PROVB_QUALITY.includes(quality))
      throw provBError(400, `Invalid 'quality': '${quality}'.`, 'invalid_request_error', 'invalid_value', 'quality');
    const format = (rec.outputFormat ?? 'png') as OutputFormat;
    if (!PROVB_FORMATS.includes(format))
      throw provBError(400, `Invalid 'output_format': '${format}'.`, 'invalid_request_error', 'invalid_value', 'output_format');
    const background = rec.background ?? 'auto';
    if (!['auto', 'opaque', 'transparent'].includes(background))
      throw provBError(400, `Invalid 'background': '${background}'.`, 'invalid_request_error', 'invalid_value', 'background');
    if (background === 'transparent' && format === 'jpeg')
      throw provBError(
        400,
        'Transparent background requires output_format png or webp.',
        'invalid_request_error',
        'invalid_value',
        'background',
      );
    if (rec.moderation && !['auto', 'low'].includes(rec.moderation))
      throw provBError(400, `Invalid 'moderation': '${rec.moderation}'.`, 'invalid_request_error', 'invalid_value', 'moderation');
    if (rec.outputCompression !== null) {
      if (!Number.isInteger(rec.outputCompression) || rec.outputCompression < 0 || rec.outputCompression > 100)
        throw provBError(
          400,
          "Invalid 'output_compression': must be 0-100.",
          'invalid_request_error',
          'invalid_value',
          'output_compression',
        );
      if (format === 'png')
        throw provBError(
          400,
          'output_compression is only supported for jpeg and webp.',
          'invalid_request_error',
          'invalid_value',
          'output_compression',
        );
    }
    if (safety) throw provBSafety();
    let first: { width: number; height: number } | undefined;
    if (images.length) {
      const meta = await sharp(images[0].data)
        .metadata()
        .catch(() => undefined);
      if (!meta?.width || !meta.height)
        throw provBError(
          400,
          'Invalid image file or mode for image 1, please check your image file.',
          'invalid_request_error',
          'invalid_image_file',
          'image',
        );
      first = { width: meta.width, height: meta.height };
    }
    const dims = provBDims(rec.size, first);
    const text = visibleText(rec.prompt);
    const data: { b64_json: string }[] = [];
    for (let i = 0; i < n; i++) {
      const img = await renderImage({
        width: dims.width,
        height: dims.height,
        format,
        text,
        transparent: background === 'transparent',
        quality: rec.outputCompression ?? undefined,
        base: images[0]?.data,
        variant: i,
      });
      data.push({ b64_json: img.toString('base64') });
    }
    rec.status = 200;
    rec.imagesReturned = n;
    rec.width = dims.width;
    rec.height = dims.height;
    const inputTokens = Math.ceil(rec.prompt.length / 4) + images.length * 323;
    return reply.send({
      created: Math.floor(Date.now() / 1000),
      background,
      output_format: format,
      quality,
      size: `${dims.width}x${dims.height}`,
      data,
      usage: {
        input_tokens: inputTokens,
        output_tokens: 1056 * n,
        total_tokens: inputTokens + 1056 * n,
        input_tokens_details: { text_tokens: Math.ceil(rec.prompt.length / 4), image_tokens: images.length * 323 },
      },
    });
  } catch (err) {
    return sendError(rec, reply, err);
  }
}

// ------------------------------------------------------------------------------------------------

export function createState(): SandboxState {
  return { requests: [], modes: { provA: freshMode(), provB: freshMode() }, seq: 0 };
}

export async function buildSandboxApp(state: SandboxState, logger?: Logger): Promise<FastifyInstance> {
  // No request logging: the recorded requests (GET /_sandbox/requests) are the sandbox's log.
  // forceCloseConnections: a stop ends requests still waiting out a [[delay]] (a client that gave up on one leaves it
  // open, and a graceful close would wait for it).
  const app = Fastify({ bodyLimit: 128 * 1024 * 1024, forceCloseConnections: true }) as unknown as FastifyInstance;
  app.addHook('onError', async (req, _reply, err) => {
    logger?.warn({ err, url: req.url }, 'sandbox request failed');
  });
  await app.register(multipart, { limits: { fileSize: 64 * 1024 * 1024, files: 32, fields: 64 } });

  app.post('/provA/v1beta/models/*', (req, reply) => handleProvA(state, req, reply));
  app.post('/provB/v1/images/generations', (req, reply) => handleProvB(state, req, reply, 'generations'));
  app.post('/provB/v1/images/edits', (req, reply) => handleProvB(state, req, reply, 'edits'));

  app.get('/_sandbox/health', async () => ({ status: 'ok' }));
  app.get('/_sandbox/requests', async (req) => {
    const q = req.query as Record<string, string | undefined>;
    let list = state.requests;
    if (q.provider) list = list.filter((r) => r.provider === q.provider);
    if (q.apiKey) list = list.filter((r) => r.apiKey === q.apiKey);
    if (q.contains) list = list.filter((r) => r.prompt.includes(q.contains as string));
    if (q.since) list = list.filter((r) => r.id > Number(q.since));
    const limit = q.limit ? Math.max(1, Number(q.limit)) : undefined;
    const out = limit ? list.slice(-limit) : list;
    return { requests: out, total: out.length, lastId: state.seq };
  });
  app.delete('/_sandbox/requests', async () => {
    const cleared = state.requests.length;
    state.requests.length = 0;
    return { cleared };
  });
  app.get('/_sandbox/mode', async () => ({ modes: state.modes }));
  app.delete('/_sandbox/mode', async () => {
    state.modes.provA = freshMode();
    state.modes.provB = freshMode();
    return { modes: state.modes };
  });
  app.post('/_sandbox/mode', async (req, reply) => {
    const b = (req.body ?? {}) as Record<string, unknown>;
    const which = (b.provider ?? 'all') as string;
    if (!['provA', 'provB', 'all'].includes(which)) return reply.status(400).send({ error: 'provider must be provA, provB or all' });
    const targets: SandboxProvider[] = which === 'all' ? ['provA', 'provB'] : [which as SandboxProvider];
    for (const t of targets) {
      const m = state.modes[t];
      if (b.reset === true) Object.assign(m, freshMode());
      if (b.failNext !== undefined) m.failNext = Math.max(0, Number(b.failNext) || 0);
      if (b.status !== undefined) m.status = Number(b.status) || 500;
      if (b.delayMs !== undefined) m.delayMs = Math.max(0, Number(b.delayMs) || 0);
      if (b.safetyNext !== undefined) m.safetyNext = Math.max(0, Number(b.safetyNext) || 0);
    }
    return { modes: state.modes };
  });
  return app;
}
