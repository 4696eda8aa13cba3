import { request } from 'undici';
import type { Provider } from '../models.js';

export interface InputImage {
  data: Buffer;
  mimeType: string;
}

/** What the pipeline asks a provider for; each adapter maps it onto its own protocol. */
export interface ProviderRequest {
  /** Upstream model name. */
  model: string;
  /** Final prompt text (negative prompt already folded in). */
  prompt: string;
  systemInstruction?: string;
  /** Image inputs: the image being edited first, then references. */
  images: InputImage[];
  /** Number of pictures wanted (provA answers one per call; provB takes n). */
  n: number;
  aspectRatio: string;
  // provA
  /** Our tier ('0.5k'...'4k'); undefined = provider default (lite: fixed 1K). */
  tier?: string;
  search?: boolean;
  thinking?: boolean;
  // provB
  size?: string;
  quality?: string;
  outputFormat?: 'png' | 'jpeg' | 'webp';
  outputCompression?: number;
  background?: string;
  moderation?: string;
}

export interface ProviderImage {
  data: Buffer;
  mimeType: string;
  /** What the image guard read from the header (set by ProviderClient.checkResult): nothing reads it again. */
  header?: { format: string; width: number; height: number };
}

export interface ProviderResult {
  images: ProviderImage[];
  /** Tokens the upstream reports for the call (0 when unknown). */
  tokens: number;
  /** Text the model returned alongside the image, if any. */
  text?: string;
}

export type ProviderErrorKind =
  | 'auth' // 401/403: try the next key
  | 'quota' // quota exhausted: try the next key
  | 'rate_limit' // 429 rate limit: try the next key
  | 'safety' // content blocked: 400 to the client
  | 'bad_request' // other 4xx: 400 to the client
  | 'server' // 5xx: breaker failure
  | 'timeout' // no answer in time: breaker failure
  | 'network' // connection failure: breaker failure
  | 'no_image'; // a 200 without a picture

export class ProviderError extends Error {
  constructor(
    readonly kind: ProviderErrorKind,
    message: string,
    readonly status?: number,
    /** Safety blocks: the upstream's reason (blockReason, finishReason or message). */
    readonly reason?: string,
    /** Quota / rate-limit refusals: seconds the upstream asked us to wait (Retry-After, RetryInfo). */
    readonly retryAfterS?: number,
  ) {
    super(message);
    this.name = 'ProviderError';
  }

  /** Failures that say something about the provider's health (count for the circuit breaker). */
  get breakerFailure(): boolean {
    return this.kind === 'server' || this.kind === 'timeout' || this.kind === 'network';
  }

  /** Failures tied to the key used: the next key of the pool is tried. */
  get keyFailure(): boolean {
    return this.kind === 'auth' || this.kind === 'quota' || this.kind === 'rate_limit';
  }
}

export interface ProviderAdapter {
  readonly provider: Provider;
  /** One upstream call with one key. Throws ProviderError. */
  call(req: ProviderRequest, apiKey: string, signal: AbortSignal): Promise<ProviderResult>;
}

/** Turns a transport failure into a ProviderError (timeout when our signal fired). */
export function transportFailure(err: unknown, signal: AbortSignal, provider: Provider, timeoutMs: number): ProviderError {
  if (err instanceof ProviderError) return err;
  if (signal.aborted) return new ProviderError('timeout', `${provider} did not answer within ${Math.round(timeoutMs / 1000)} s`);
  const msg = (err as Error)?.message ?? String(err);
  // undici names the socket error by its code (ECONNREFUSED, UND_ERR_SOCKET); a wrapped one is its cause.
  const e = err as { code?: string; cause?: { code?: string; message?: string } };
  return new ProviderError('network', `${provider} request failed: ${e?.cause?.code ?? e?.code ?? e?.cause?.message ?? msg}`);
}

/** Default cap on a successful upstream answer (base64 pictures: provB n=4 at 4K PNG stays well below). */
export const MAX_RESPONSE_BYTES = 192 * 1024 * 1024;
/** Error answers are only read this far (the rest is dropped; they are summarised for logs and details). */
export const MAX_ERROR_BODY_BYTES = 64 * 1024;

export interface UpstreamBody {
  /** Parsed JSON, or undefined when the body is empty or not JSON. */
  json: any;
  /** A short printable summary of a non-JSON body (HTML pages: title / text, whitespace collapsed). */
  summary?: string;
}

/** An upstream answer: status, headers (lower-case names) and the body as readBody makes it. */
export interface UpstreamAnswer {
  status: number;
  ok: boolean;
  header(name: string): string | undefined;
  body: UpstreamBody;
}

/**
 * POSTs to a provider with undici's request() (the provider's own HTTP dialect, without fetch's WHATWG
 * streams layer: a third of the client's CPU per call) and reads the answer with readBody's caps.
 */
export async function postUpstream(
  url: string,
  init: { headers: Record<string, string>; body: string | FormData; signal: AbortSignal },
  provider: Provider,
  maxBytes = MAX_RESPONSE_BYTES,
): Promise<UpstreamAnswer> {
  const res = await request(url, { method: 'POST', headers: init.headers, body: init.body as never, signal: init.signal });
  const headers = res.headers;
  const header = (name: string): string | undefined => {
    const v = headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
  const ok = res.statusCode >= 200 && res.statusCode < 300;
  const body = await readBody({ status: res.statusCode, ok, header, body: res.body }, provider, maxBytes);
  return { status: res.statusCode, ok, header, body };
}

/** An answer whose body is still the stream. */
type RawAnswer = Omit<UpstreamAnswer, 'body'> & { body: AsyncIterable<Uint8Array> & { destroy(err?: Error): unknown } };

/**
 * Reads an upstream answer with a size cap. Successful answers above `maxBytes` (by Content-Length or while
 * streaming) are a `server` ProviderError; error answers are truncated at MAX_ERROR_BODY_BYTES. Non-JSON
 * bodies (an HTML 502 page from a proxy) come back as a short text summary, never as raw markup.
 */
async function readBody(res: RawAnswer, provider: Provider, maxBytes: number): Promise<UpstreamBody> {
  const limit = res.ok ? maxBytes : Math.min(maxBytes, MAX_ERROR_BODY_BYTES);
  const tooLarge = (n: number | string) =>
    new ProviderError('server', `${provider} answered ${res.status} with a body over the ${limit}-byte cap (${n} bytes)`, res.status);
  const declared = Number(res.header('content-length'));
  if (res.ok && Number.isFinite(declared) && declared > limit) {
    res.body.destroy();
    throw tooLarge(declared);
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const value of res.body) {
    total += value.byteLength;
    if (total > limit) {
      res.body.destroy();
      if (res.ok) throw tooLarge(`more than ${limit}`);
      chunks.push(Buffer.from(value.subarray(0, value.byteLength - (total - limit))));
      break;
    }
    chunks.push(Buffer.from(value.buffer, value.byteOffset, value.byteLength)); // a view, not a copy
  }
  const text = (chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)).toString('utf8');
  if (!text.trim()) return { json: undefined };
  try {
    return { json: JSON.parse(text) };
  } catch {
    return { json: undefined, summary: summarize(text) };
  }
}

/** One line out of a non-JSON body: an HTML page's <title> (or its text), whitespace collapsed, 200 chars. */
export function summarize(text: string): string {
  const title = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(text)?.[1];
  const plain = (title ?? text)
    .replace(/<(script|style)[\s\S]*?<\/\1>/gi, ' ')
    .replace(/<[^>]*>/g, ' ')
    .replace(/&nbsp;/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  return plain.length > 200 ? `${plain.slice(0, 200)}...` : plain || 'empty body';
}

/**
 * Strict base64 (standard or URL-safe alphabet, optional padding, whitespace ignored): Buffer.from silently
 * drops invalid characters, which would turn a malformed answer into a corrupt picture.
 */
export function decodeBase64(data: string, provider: Provider): Buffer {
  // Fast path (no scan of the ~100 KB string): Node skips characters outside the alphabets, so a string of
  // n data characters (trailing '=' aside; n % 4 = 1 is never base64) decodes to exactly floor(3n/4) bytes
  // only when it skipped none. Anything else (whitespace included) takes the strict check below.
  let n = data.length;
  if (n > 0 && data.charCodeAt(n - 1) === 61 /* = */) n--;
  if (n > 0 && data.charCodeAt(n - 1) === 61) n--;
  if (n > 0 && n % 4 !== 1) {
    const bytes = Buffer.from(data, 'base64');
    if (bytes.length === Math.floor((n * 3) / 4)) return bytes;
  }
  const s = /\s/.test(data) ? data.replace(/\s+/g, '') : data;
  if (!s || s.length % 4 === 1 || !/^[A-Za-z0-9+/_-]+={0,2}$/.test(s)) {
    throw new ProviderError('server', `${provider} answered with image data that is not valid base64`, 200);
  }
  return Buffer.from(s, 'base64'); // Node's decoder takes both alphabets
}

/** Seconds from Retry-After (delta seconds or HTTP date) or retry-after-ms; undefined when absent. */
export function retryAfterHeader(header: (name: string) => string | null | undefined, now = Date.now()): number | undefined {
  const ms = Number(header('retry-after-ms'));
  if (header('retry-after-ms') && Number.isFinite(ms) && ms >= 0) return Math.max(1, Math.ceil(ms / 1000));
  const v = header('retry-after')?.trim();
  if (!v) return undefined;
  if (/^\d+(\.\d+)?$/.test(v)) return Math.max(1, Math.ceil(Number(v)));
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(1, Math.ceil((at - now) / 1000)) : undefined;
}
