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

/** Turns a fetch failure into a ProviderError (timeout when our signal fired). */
export function transportFailure(err: unknown, signal: AbortSignal, provider: Provider, timeoutMs: number): ProviderError {
  if (err instanceof ProviderError) return err;
  if (signal.aborted) return new ProviderError('timeout', `${provider} did not answer within ${Math.round(timeoutMs / 1000)} s`);
  const msg = (err as Error)?.message ?? String(err);
  const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
  return new ProviderError('network', `${provider} request failed: ${cause?.code ?? cause?.message ?? msg}`);
}

export async function readJson(res: Response): Promise<any> {
  const text = await res.text();
  if (!text) return {};
  try {
    return JSON.parse(text);
  } catch {
    return { raw: text.slice(0, 500) };
  }
}
