import { createHash } from 'node:crypto';
import { AppError } from '@imagegen/platform';

export type BreakerState = 'closed' | 'open' | 'half_open';

export interface BreakerInfo {
  provider: string;
  failures: number;
  /** Which credential's circuit changed ('tenant <id> key <sha256 prefix>'; never the key itself). */
  credential: string;
}

export interface BreakerOptions {
  /** Consecutive failures that open a circuit. */
  failureThreshold: number;
  /** How long a circuit stays open before one trial request is let through (half_open). */
  resetTimeoutMs: number;
  /** Called on every state change of a credential's circuit (the service logs it). */
  onChange?: (from: BreakerState, to: BreakerState, info: BreakerInfo) => void;
  now?: () => number;
  /** Circuits kept at most (closed, healthy ones are dropped first). */
  maxCircuits?: number;
}

export interface BreakerTicket {
  success(): void;
  failure(): void;
  release(): void;
}

const SEVERITY: Record<BreakerState, number> = { closed: 0, half_open: 1, open: 2 };

/**
 * The circuit breakers of one provider, one circuit PER CREDENTIAL (ARCHITECTURE rule 4): a credential is
 * one tenant's key, so a tenant whose requests make the upstream fail (or whose key the upstream treats
 * badly) opens only its own circuit, and every other tenant keeps generating. Only upstream faults are
 * reported as failures by the client (5xx, timeouts, connection errors); refusals caused by the request's
 * content (4xx, safety blocks) and key refusals never are.
 *
 * Each circuit: closed -> open after `failureThreshold` consecutive failures; open -> half_open once
 * `resetTimeoutMs` has elapsed (checked when a request arrives); half_open lets one trial request through:
 * success -> closed, failure -> open again. While open (or while the trial runs) requests with that
 * credential are refused at once with 503 and Retry-After, without touching the upstream.
 */
export class CircuitBreaker {
  private readonly circuits = new Map<string, Circuit>();
  private readonly now: () => number;

  constructor(
    readonly provider: string,
    readonly opts: BreakerOptions,
  ) {
    this.now = opts.now ?? Date.now;
  }

  /** The id of a tenant's credential: the tenant and a hash of the key (a key shared by two tenants is two credentials). */
  static credentialOf(tenantId: string, apiKey: string): string {
    return `${tenantId}\u0000${createHash('sha256').update(apiKey).digest('hex')}`;
  }

  private circuit(credential: string): Circuit {
    let c = this.circuits.get(credential);
    if (!c) {
      this.prune();
      const [tenant, hash] = credential.split('\u0000');
      const label = hash ? `tenant ${tenant} key ${hash.slice(0, 8)}` : tenant || 'default';
      c = new Circuit(this.provider, label, this.opts, this.now);
      this.circuits.set(credential, c);
    }
    return c;
  }

  /** Bounds the map: healthy closed circuits carry no information and go first, then the oldest closed ones. */
  private prune() {
    const max = this.opts.maxCircuits ?? 10_000;
    if (this.circuits.size < max) return;
    for (const [k, c] of this.circuits) if (c.state === 'closed' && c.failures === 0) this.circuits.delete(k);
    if (this.circuits.size < max) return;
    for (const [k, c] of this.circuits) {
      if (this.circuits.size < max) break;
      if (c.state === 'closed') this.circuits.delete(k);
    }
  }

  /** The worst state among the credentials' circuits ('closed' when none is open or on trial). */
  get current(): BreakerState {
    let worst: BreakerState = 'closed';
    for (const c of this.circuits.values()) if (SEVERITY[c.state] > SEVERITY[worst]) worst = c.state;
    return worst;
  }

  /** The state of one credential's circuit. */
  stateOf(credential = ''): BreakerState {
    return this.circuits.get(credential)?.state ?? 'closed';
  }

  /** Provider summary: the worst circuit's state and failures, and how many credentials' circuits are open. */
  status() {
    let worst: Circuit | undefined;
    let open = 0;
    for (const c of this.circuits.values()) {
      if (c.state !== 'closed') open++;
      if (!worst || SEVERITY[c.state] > SEVERITY[worst.state] || (c.state === worst.state && c.failures > worst.failures)) worst = c;
    }
    const state = worst?.state ?? 'closed';
    return {
      provider: this.provider,
      state,
      consecutiveFailures: worst?.failures ?? 0,
      openedAt: state === 'closed' || !worst ? undefined : new Date(worst.openedAt).toISOString(),
      failureThreshold: this.opts.failureThreshold,
      resetTimeoutMs: this.opts.resetTimeoutMs,
      openCircuits: open,
    };
  }

  /**
   * Asks for permission to call the upstream with `credential` (CircuitBreaker.credentialOf; '' = one shared
   * circuit); throws 503 when that credential's circuit is open. The returned ticket must be settled with
   * success() or failure() (or release() when the outcome says nothing about the upstream's health).
   */
  acquire(credential = ''): BreakerTicket {
    return this.circuit(credential).acquire();
  }
}

/** One credential's circuit. */
class Circuit {
  state: BreakerState = 'closed';
  failures = 0;
  openedAt = 0;
  private trialInFlight = false;

  constructor(
    private readonly provider: string,
    private readonly label: string,
    private readonly opts: BreakerOptions,
    private readonly now: () => number,
  ) {}

  private move(to: BreakerState) {
    const from = this.state;
    if (from === to) return;
    this.state = to;
    this.opts.onChange?.(from, to, { provider: this.provider, failures: this.failures, credential: this.label });
  }

  acquire(): BreakerTicket {
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
