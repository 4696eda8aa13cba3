import { type Logger, recordWebhookAttempt, SafeFetchError, type Sql, safeFetch, type WebhookAttemptOutcome } from '@imagegen/platform';
import type { SecretBox } from './signing.js';
import { signedHeaders } from './signing.js';
import {
  type ClaimedDelivery,
  claimDue,
  type EndpointRow,
  loadEndpointForDelivery,
  nextDueAt,
  recordSuccess,
  releaseLease,
} from './store.js';

export interface RetryPolicy {
  /** Delay before the 2nd attempt; each further one is 4x longer (default 30 s, env WEBHOOK_RETRY_BASE_MS). */
  baseMs: number;
  factor: number;
  /** Cap of one delay (default 6 h). */
  maxMs: number;
  /** Uniform jitter, as a fraction (0.25: +-25%). */
  jitter: number;
  /** Attempts of one delivery before it is marked failed (default 10). */
  maxAttempts: number;
  /** Consecutive failed attempts (any delivery) after which the endpoint is disabled (5). */
  disableAfter: number;
}

export const DEFAULT_POLICY: RetryPolicy = {
  baseMs: 30_000,
  factor: 4,
  maxMs: 6 * 3_600_000,
  jitter: 0.25,
  maxAttempts: 10,
  disableAfter: 5,
};

/**
 * Delay after the `attempt`-th failed attempt (1-based): base * factor^(attempt-1) with jitter, never
 * above maxMs (the cap bounds the jittered delay too: WEBHOOK_RETRY_MAX_MS is the longest delay).
 */
export function retryDelayMs(attempt: number, p: RetryPolicy, random = Math.random): number {
  const raw = Math.min(p.maxMs, p.baseMs * p.factor ** Math.max(0, attempt - 1));
  const j = 1 + p.jitter * (2 * random() - 1);
  return Math.max(0, Math.min(p.maxMs, Math.round(raw * j)));
}

export interface DispatcherOptions {
  sql: Sql;
  logger: Logger;
  secrets: SecretBox;
  policy: RetryPolicy;
  timeoutMs: number;
  pollMs: number;
  allowLoopback: boolean;
  ca?: string;
  /** Deliveries in flight at once (each to a different endpoint). */
  batch?: number;
}

export interface Dispatcher {
  /** Look for due deliveries now (after a commit that created or re-enabled some). */
  wake(): void;
  stop(): Promise<void>;
}

interface AttemptResult {
  ok: boolean;
  status?: number;
  error?: string;
  durationMs: number;
}

const MAX_RESPONSE_BYTES = 256 * 1024;

/**
 * The delivery loop: leases due deliveries (persisted, so retries survive restarts), delivers them
 * one at a time per endpoint (different endpoints in parallel, up to `batch` in flight), and records
 * each attempt. Deliveries run on their own: a slow or hanging endpoint (up to the timeout) does not
 * hold back the next deliveries of the others; each finished delivery wakes the loop for its endpoint's next.
 */
export function startDispatcher(o: DispatcherOptions): Dispatcher {
  const log = o.logger.child({ component: 'webhook-dispatcher' });
  const batch = o.batch ?? 20;
  const leaseMs = o.timeoutMs + 20_000;
  let stopped = false;
  let kicked = false;
  let wakeUp: (() => void) | undefined;
  const inFlight = new Set<Promise<void>>();
  const wake = () => {
    kicked = true;
    wakeUp?.();
  };

  async function attempt(d: ClaimedDelivery, url: string, secret: string): Promise<AttemptResult> {
    const started = performance.now();
    try {
      const res = await safeFetch(url, {
        method: 'POST',
        body: d.payload,
        headers: signedHeaders(secret, d.eventId, d.payload),
        requireHttps: true,
        maxRedirects: 0,
        timeoutMs: o.timeoutMs,
        maxBytes: MAX_RESPONSE_BYTES,
        allowLoopback: o.allowLoopback,
        ca: o.ca,
        // The same receivers again and again: one TCP and TLS handshake per receiver, not per delivery.
        reuseConnections: true,
      });
      const durationMs = Math.round(performance.now() - started);
      const ok = res.status >= 200 && res.status < 300;
      return { ok, status: res.status, durationMs, error: ok ? undefined : `HTTP ${res.status}` };
    } catch (err) {
      const durationMs = Math.round(performance.now() - started);
      const msg =
        err instanceof SafeFetchError
          ? err.reason === 'too_many_redirects'
            ? 'redirects are not followed'
            : err.reason === 'timeout'
              ? `timed out after ${o.timeoutMs} ms`
              : err.message
          : String((err as Error)?.message ?? err);
      return { ok: false, error: msg.slice(0, 500), durationMs };
    }
  }

  /**
   * Writes the attempt and its consequences; answers its outcome (undefined when the endpoint is gone) and, after a
   * success, the endpoint's next due delivery, leased in the same statement (recordSuccess).
   */
  async function record(
    d: ClaimedDelivery,
    r: AttemptResult,
  ): Promise<{ outcome?: WebhookAttemptOutcome; next?: ClaimedDelivery; endpoint?: EndpointRow }> {
    const attemptNo = d.attemptCount + 1;
    if (r.ok) {
      const done = await recordSuccess(
        o.sql,
        d,
        { attempt: attemptNo, status: r.status, durationMs: r.durationMs },
        { leaseMs, leaseNext: !stopped },
      );
      return done.found ? { outcome: 'succeeded', next: done.next } : {};
    }
    return o.sql.begin(async (tx): Promise<{ outcome?: WebhookAttemptOutcome; next?: ClaimedDelivery; endpoint?: EndpointRow }> => {
      const [ep] =
        await tx`SELECT id, consecutive_failures, enabled FROM endpoints WHERE id = ${d.endpointId} AND tenant_id = ${d.tenantId} FOR UPDATE`;
      if (!ep) return {}; // deleted meanwhile (its deliveries went with it)
      await tx`
        INSERT INTO delivery_attempts (delivery_id, attempt, response_status, error, duration_ms)
        VALUES (${d.id}, ${attemptNo}, ${r.status ?? null}, ${r.error ?? null}, ${r.durationMs})`;
      const final = attemptNo >= o.policy.maxAttempts;
      const delay = retryDelayMs(attemptNo, o.policy);
      await tx`
        UPDATE deliveries SET
          status = ${final ? 'failed' : 'pending'},
          attempt_count = ${attemptNo},
          completed_at = ${final ? tx`now()` : null},
          next_attempt_at = ${final ? null : tx`now() + ${`${delay} milliseconds`}::interval`},
          locked_until = NULL, last_response_status = ${r.status ?? null}, last_error = ${r.error ?? null}
        WHERE id = ${d.id}`;
      const failures = Number(ep.consecutive_failures) + 1;
      const disable = ep.enabled && failures >= o.policy.disableAfter;
      await tx`
        UPDATE endpoints SET consecutive_failures = ${failures}, last_delivery_status = 'failed',
          last_response_status = ${r.status ?? null}, last_delivery_at = now(), updated_at = now(),
          enabled = ${disable ? false : ep.enabled},
          disabled_reason = ${disable ? 'consecutive_failures' : tx`disabled_reason`}
        WHERE id = ${d.endpointId}`;
      if (disable)
        log.warn({ endpointId: d.endpointId, tenantId: d.tenantId, failures }, 'webhook endpoint disabled after consecutive failures');
      return { outcome: disable ? 'disabled' : final ? 'failed' : 'retrying' };
    });
  }

  /**
   * record(), then the attempt counted by outcome once it is stored; the endpoint's next delivery, if leased, with
   * the endpoint as the recording statement locked it.
   */
  async function recordAndCount(d: ClaimedDelivery, r: AttemptResult): Promise<{ next?: ClaimedDelivery; endpoint?: EndpointRow }> {
    const { outcome, next, endpoint } = await record(d, r);
    if (outcome) recordWebhookAttempt(outcome);
    return { next, endpoint };
  }

  async function deliverAll(claimed: ClaimedDelivery[]): Promise<void> {
    const list: { d: ClaimedDelivery; endpoint?: EndpointRow }[] = claimed.map((d) => ({ d }));
    for (let item = list.shift(); item; item = list.shift()) {
      const d = item.d;
      if (stopped) {
        await releaseLease(o.sql, d.id);
        continue;
      }
      // A fresh read (the endpoint may have been disabled by the previous delivery or by its owner), unless the
      // statement that recorded the previous delivery read it under its lock.
      const ep = item.endpoint ?? (await loadEndpointForDelivery(o.sql, d.tenantId, d.endpointId));
      if (!ep) continue;
      if (!ep.enabled) {
        await releaseLease(o.sql, d.id);
        continue;
      }
      let secret: string;
      try {
        secret = o.secrets.open(ep.secret);
      } catch (err) {
        log.error({ err, endpointId: ep.id }, 'cannot open webhook secret');
        await recordAndCount(d, { ok: false, error: 'signing secret unavailable', durationMs: 0 });
        continue;
      }
      const r = await attempt(d, ep.url, secret);
      log.debug({ deliveryId: d.id, endpointId: ep.id, ok: r.ok, status: r.status, error: r.error }, 'webhook attempt');
      const { next, endpoint } = await recordAndCount(d, r);
      if (next) list.push({ d: next, endpoint });
    }
  }

  /** Leases what is due (at most one per endpoint, none for an endpoint with one in flight) and starts it. */
  async function round(): Promise<number> {
    const room = batch - inFlight.size;
    if (room <= 0) return 0;
    const claimed = await claimDue(o.sql, room, leaseMs);
    const byEndpoint = new Map<number, ClaimedDelivery[]>();
    for (const d of claimed) byEndpoint.set(d.endpointId, [...(byEndpoint.get(d.endpointId) ?? []), d]);
    for (const list of byEndpoint.values()) {
      const run: Promise<void> = deliverAll(list)
        .catch((err) => log.warn({ err }, 'webhook delivery failed'))
        .finally(() => {
          inFlight.delete(run);
          wake();
        });
      inFlight.add(run);
    }
    return claimed.length;
  }

  const loop = (async () => {
    while (!stopped) {
      let n = 0;
      try {
        n = await round();
      } catch (err) {
        log.warn({ err }, 'webhook dispatcher round failed');
      }
      if (stopped) break;
      if (n > 0 && inFlight.size < batch) continue; // more may be due
      if (kicked) {
        kicked = false;
        continue;
      }
      let sleep = o.pollMs;
      try {
        const due = await nextDueAt(o.sql);
        if (due) sleep = Math.max(5, Math.min(o.pollMs, due.getTime() - Date.now()));
      } catch {}
      await new Promise<void>((resolve) => {
        if (kicked) return resolve(); // woken while nextDueAt was reading
        const t = setTimeout(resolve, sleep);
        wakeUp = () => {
          clearTimeout(t);
          resolve();
        };
      });
      wakeUp = undefined;
    }
  })();

  return {
    wake,
    async stop() {
      stopped = true;
      wakeUp?.();
      await loop;
      // Attempts under way finish (each bounded by the timeout) and are recorded.
      while (inFlight.size > 0) await Promise.all([...inFlight]);
    },
  };
}
