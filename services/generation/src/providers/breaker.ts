import { AppError } from '@imagegen/platform';

export type BreakerState = 'closed' | 'open' | 'half_open';

export interface BreakerOptions {
  /** Consecutive failures that open the circuit. */
  failureThreshold: number;
  /** How long the circuit stays open before one trial request is let through (half_open). */
  resetTimeoutMs: number;
  /** Called on every state change (the service logs it). */
  onChange?: (from: BreakerState, to: BreakerState, info: { provider: string; failures: number }) => void;
  now?: () => number;
}

/**
 * One circuit breaker per provider (ARCHITECTURE rule 4, SPEC 3):
 * closed -> open after `failureThreshold` consecutive failures; open -> half_open once `resetTimeoutMs`
 * has elapsed (checked when a request arrives); half_open lets one trial request through: success ->
 * closed, failure -> open again. While open (or while the trial runs) requests are refused at once with
 * 503 and Retry-After, without touching the upstream.
 */
export class CircuitBreaker {
  private state: BreakerState = 'closed';
  private failures = 0;
  private openedAt = 0;
  private trialInFlight = false;
  private readonly now: () => number;

  constructor(
    readonly provider: string,
    readonly opts: BreakerOptions,
  ) {
    this.now = opts.now ?? Date.now;
  }

  get current(): BreakerState {
    return this.state;
  }

  status() {
    return {
      provider: this.provider,
      state: this.state,
      consecutiveFailures: this.failures,
      openedAt: this.state === 'closed' ? undefined : new Date(this.openedAt).toISOString(),
      failureThreshold: this.opts.failureThreshold,
      resetTimeoutMs: this.opts.resetTimeoutMs,
    };
  }

  private move(to: BreakerState) {
    const from = this.state;
    if (from === to) return;
    this.state = to;
    this.opts.onChange?.(from, to, { provider: this.provider, failures: this.failures });
  }

  /**
   * Asks for permission to call the upstream; throws 503 when the circuit is open. The returned
   * ticket must be settled with success() or failure() (or release() when the outcome says nothing
   * about the provider's health, e.g. a rejected key or a safety block).
   */
  acquire(): { success(): void; failure(): void; release(): void } {
    if (this.state === 'open') {
      const waited = this.now() - this.openedAt;
      if (waited < this.opts.resetTimeoutMs) throw this.openError(this.opts.resetTimeoutMs - waited);
      this.move('half_open');
    }
    let trial = false;
    if (this.state === 'half_open') {
      if (this.trialInFlight) throw this.openError(1000);
      this.trialInFlight = true;
      trial = true;
    }
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      if (trial) this.trialInFlight = false;
      fn();
    };
    return {
      success: () =>
        settle(() => {
          this.failures = 0;
          if (this.state !== 'closed') this.move('closed');
        }),
      failure: () =>
        settle(() => {
          this.failures++;
          if (this.state === 'half_open' || (this.state === 'closed' && this.failures >= this.opts.failureThreshold)) {
            this.openedAt = this.now();
            this.move('open');
          }
        }),
      release: () => settle(() => {}),
    };
  }

  private openError(retryInMs: number): AppError {
    const seconds = Math.max(1, Math.ceil(retryInMs / 1000));
    return new AppError(
      503,
      {
        error: `Provider ${this.provider} is temporarily unavailable (circuit breaker open); retry in ${seconds} s`,
        code: 'PROVIDER_UNAVAILABLE',
      },
      { 'Retry-After': String(seconds) },
    );
  }
}
