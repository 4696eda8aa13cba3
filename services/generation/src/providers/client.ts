import {
  AppError,
  badRequest,
  guardImage,
  ImageGuardError,
  isAppError,
  PROVIDER_IMAGE_LIMITS,
  recordProviderCall,
  SpanKind,
  withSpan,
} from '@imagegen/platform';
import type { Provider } from '../models.js';
import { unsendableProblem } from '../validate.js';
import { CircuitBreaker } from './breaker.js';
import { type ProviderAdapter, type ProviderError, type ProviderRequest, type ProviderResult, transportFailure } from './types.js';

export const MAX_KEYS_PER_PROVIDER = 5;

export interface ProviderClientOptions {
  adapter: ProviderAdapter;
  breaker: CircuitBreaker;
  timeoutMs: number;
}

/** Progress lines for the execution log ("key 1 of 2 refused ..."). */
export type AttemptLog = (message: string, level?: 'info' | 'warn' | 'error') => void;

/**
 * One provider as the pipeline sees it: the tenant's key pool with a rotating start (per tenant), failover
 * to the next key on an auth, quota or rate-limit failure (or when that key's circuit is open), a circuit
 * breaker per credential (tenant + key) around every upstream call, and the per-provider timeout. What is
 * sent (prompt text, input images) and what comes back (pictures) passes the same checks as everything that
 * enters: text a provider cannot take is a 400 before anything is sent, images go through the image guard.
 * Upstream failures become AppErrors with client-facing text.
 */
export class ProviderClient {
  readonly provider: Provider;
  private readonly rotation = new Map<string, number>();

  constructor(private readonly opts: ProviderClientOptions) {
    this.provider = opts.adapter.provider;
  }

  /** Index of the key this tenant's next request starts with (round robin over the pool). */
  private nextStart(tenantId: string, size: number): number {
    const n = this.rotation.get(tenantId) ?? 0;
    this.rotation.set(tenantId, (n + 1) % 1_000_000);
    if (this.rotation.size > 100_000) this.rotation.clear();
    return n % size;
  }

  /** `cancel`: the execution's cancel; it aborts the call in flight (which then says nothing of the upstream's health). */
  async generate(
    tenantId: string,
    pool: string[],
    req: ProviderRequest,
    log: AttemptLog = () => {},
    cancel?: AbortSignal,
  ): Promise<ProviderResult> {
    const keys = pool.filter(Boolean).slice(0, MAX_KEYS_PER_PROVIDER);
    if (keys.length === 0) throw badRequest(`No ${this.provider} credentials are configured for this tenant`);
    await checkRequest(req);
    const start = this.nextStart(tenantId, keys.length);
    const refused: ProviderError[] = [];
    let circuitOpen: AppError | undefined;
    for (let i = 0; i < keys.length; i++) {
      const idx = (start + i) % keys.length;
      let ticket: ReturnType<CircuitBreaker['acquire']>;
      try {
        // This credential's circuit: 503 at once while it is open (another key of the pool may still be fine).
        ticket = this.opts.breaker.acquire(CircuitBreaker.credentialOf(tenantId, keys[idx]));
      } catch (err) {
        if (!isAppError(err) || err.status !== 503) throw err;
        circuitOpen ??= err;
        const more = i + 1 < keys.length;
        log(
          `${this.provider} key ${idx + 1} of ${keys.length} skipped (circuit breaker open)${more ? '; trying the next key' : ''}`,
          'warn',
        );
        continue;
      }
      if (cancel?.aborted) {
        ticket.release();
        throw cancel.reason;
      }
      const timeout = AbortSignal.timeout(this.opts.timeoutMs);
      const signal = cancel ? AbortSignal.any([timeout, cancel]) : timeout;
      const started = performance.now();
      // One span per attempt (key failover shows as sibling attempts), around the adapter's HTTP client span.
      const attempt = { 'imagegen.provider': this.provider, 'imagegen.provider.model': req.model, 'imagegen.provider.key': idx + 1 };
      try {
        const result = await withSpan(`${this.provider} generate`, { kind: SpanKind.INTERNAL, attributes: attempt }, async (span) => {
          try {
            return await this.opts.adapter.call(req, keys[idx], signal);
          } catch (err) {
            // Classified once, here: the catch below gets the ProviderError itself (transportFailure passes it through).
            const pe = transportFailure(err, signal, this.provider, this.opts.timeoutMs);
            span.setAttribute('imagegen.provider.outcome', pe.kind);
            throw pe;
          }
        });
        ticket.success();
        recordProviderCall(this.provider, 'success', (performance.now() - started) / 1000, req.model);
        await checkResult(result, this.provider);
        return result;
      } catch (err) {
        if (isAppError(err)) throw err; // checkResult's refusal of the pictures (the call itself succeeded)
        if (cancel?.aborted && !timeout.aborted) {
          ticket.release();
          throw cancel.reason;
        }
        const pe = transportFailure(err, signal, this.provider, this.opts.timeoutMs);
        recordProviderCall(this.provider, pe.kind, (performance.now() - started) / 1000, req.model);
        // Only upstream faults count; anything the upstream answered deliberately (even a refusal) shows it is healthy.
        if (pe.breakerFailure) ticket.failure();
        else ticket.success();
        if (pe.keyFailure) {
          refused.push(pe);
          const more = i + 1 < keys.length;
          log(
            `${this.provider} key ${idx + 1} of ${keys.length} refused (${pe.kind}, HTTP ${pe.status})${more ? '; trying the next key' : ''}`,
            'warn',
          );
          continue;
        }
        throw toAppError(pe, this.provider, this.opts.timeoutMs);
      }
    }
    if (circuitOpen && refused.length === 0) throw circuitOpen;
    throw exhausted(this.provider, refused);
  }
}

/**
 * What is about to be sent: text a provider cannot take (NUL and other control characters, unpaired
 * surrogates; validate.ts refuses them in the request, this also covers text composed from saved assets)
 * and the input images (edit source, references) through the image guard, with the bound of images the
 * platform itself produces. A 400: the request's content, never the provider's health.
 */
export async function checkRequest(req: ProviderRequest): Promise<void> {
  const problems = [unsendableProblem(req.prompt, 'prompt'), unsendableProblem(req.systemInstruction, 'system_instruction')].filter(
    (p): p is string => !!p,
  );
  if (problems.length) throw badRequest('Invalid request payload', problems);
  for (const [i, img] of req.images.entries()) {
    try {
      await guardImage(img.data, { limits: PROVIDER_IMAGE_LIMITS });
    } catch (err) {
      if (err instanceof ImageGuardError) throw badRequest(err.body.error, [`input image ${i + 1} of ${req.images.length}`]);
      throw err;
    }
  }
}

/** The provider's pictures pass the image guard before anything decodes them (a 502: the upstream misbehaved). */
export async function checkResult(result: ProviderResult, provider: Provider): Promise<void> {
  for (const img of result.images) {
    try {
      const g = await guardImage(img.data, { limits: PROVIDER_IMAGE_LIMITS });
      img.header = { format: g.format, width: g.width, height: g.height };
    } catch (err) {
      if (!(err instanceof ImageGuardError)) throw err;
      if (err.reason === 'unsupported_format' || err.reason === 'no_pixels') {
        throw new AppError(502, { error: 'Image generation failed: the provider returned data that is not an image' });
      }
      throw new AppError(502, {
        error: `Image generation failed: provider ${provider} returned an image the platform does not accept`,
        details: [err.body.error],
      });
    }
  }
}

export function safetyMessage(reason: string): string {
  return `Content blocked by provider safety filters: ${reason}`;
}

export function toAppError(pe: ProviderError, provider: Provider, timeoutMs: number): AppError {
  switch (pe.kind) {
    case 'safety':
      return new AppError(400, {
        error: safetyMessage(pe.reason ?? 'unspecified'),
        code: 'CONTENT_BLOCKED',
        details: { provider, reason: pe.reason ?? 'unspecified' },
      });
    case 'bad_request':
      return new AppError(400, { error: `Provider ${provider} rejected the request`, details: [pe.message] });
    case 'timeout':
      return new AppError(504, {
        error: `Image generation timed out: provider ${provider} did not answer within ${Math.round(timeoutMs / 1000)} s`,
      });
    case 'no_image':
      return new AppError(502, { error: `Image generation failed: ${pe.message}` });
    case 'network':
    case 'server':
      return new AppError(502, { error: `Image generation failed: provider ${provider} is not available`, details: [pe.message] });
    default:
      return exhausted(provider, [pe]);
  }
}

function exhausted(provider: Provider, refused: ProviderError[]): AppError {
  if (refused.every((e) => e.kind === 'auth')) {
    return new AppError(502, {
      error: `Image generation failed: provider ${provider} rejected every configured API key`,
      code: 'PROVIDER_AUTH_FAILED',
    });
  }
  // The upstream's own hints (Retry-After / RetryInfo; 30 s for a key without one): the soonest any key frees up, 1 s-1 h.
  const hints = refused.filter((e) => e.kind !== 'auth').map((e) => e.retryAfterS ?? 30);
  const wait = hints.length ? Math.min(3600, Math.max(1, Math.min(...hints))) : 30;
  return new AppError(
    503,
    { error: `Provider ${provider} quota or rate limit reached for every configured API key; retry later`, code: 'PROVIDER_RATE_LIMITED' },
    { 'Retry-After': String(wait) },
  );
}
