import type { Logger } from 'pino';
import { invalidPublishSubject, matchesAny, sanitizeDurable } from './subjects.js';
import { handleTraced } from './trace.js';
import {
  DEFAULT_RETRY,
  type EventMessage,
  type EventTransport,
  type OutgoingEvent,
  PermanentPublishError,
  type RetryPolicy,
  retryDelay,
  type SubscribeOptions,
  TransientPublishError,
} from './types.js';

export interface InProcessTransportOptions {
  logger: Logger;
  /** Same id published again within this window is dropped (JetStream duplicate_window). */
  duplicateWindowMs?: number;
  /** Messages kept so that a durable created later still sees them (like a stream's history). */
  retainMs?: number;
  retainMax?: number;
  retry?: RetryPolicy;
  /** Largest payload accepted, in bytes, like the NATS server's max_payload (default: no limit). */
  maxPayload?: number;
}

interface Pending {
  msg: OutgoingEvent;
  deliveries: number;
  notBefore: number;
}

interface Subscriber {
  handler: SubscribeOptions['handler'];
  maxDeliver: number;
  busy: boolean;
  active: boolean;
  inflight?: Promise<void>;
}

/** A durable's state lives as long as the transport, so re-subscribing resumes where it stopped. */
interface Durable {
  name: string;
  subjects: string[];
  queue: Pending[];
  subs: Set<Subscriber>;
  timer?: NodeJS.Timeout;
  timerAt?: number;
}

/**
 * In-memory transport for the all-in-one shape, with the JetStream semantics the services rely on:
 * per-durable queues, dedupe by id, ack after the handler resolves, redelivery with backoff.
 * Nothing survives the process (the outbox does: unpublished rows are relayed again on start).
 */
export function createInProcessTransport(opts: InProcessTransportOptions): EventTransport {
  const log = opts.logger.child({ transport: 'inprocess' });
  const windowMs = opts.duplicateWindowMs ?? 120_000;
  const retainMs = opts.retainMs ?? 3_600_000;
  const retainMax = opts.retainMax ?? 10_000;
  const retry = opts.retry ?? DEFAULT_RETRY;
  const seen = new Map<string, number>(); // id -> time published (insertion ordered)
  const history: { msg: OutgoingEvent; at: number }[] = [];
  const durables = new Map<string, Durable>();
  let closed = false;

  function trim(now: number) {
    for (const [id, at] of seen) {
      if (now - at < windowMs) break;
      seen.delete(id);
    }
    while (history.length > 0 && (history.length > retainMax || now - history[0].at > retainMs)) history.shift();
  }

  function schedule(d: Durable, at: number) {
    if (d.timer && d.timerAt !== undefined && d.timerAt <= at) return;
    if (d.timer) clearTimeout(d.timer);
    d.timerAt = at;
    d.timer = setTimeout(
      () => {
        d.timer = undefined;
        d.timerAt = undefined;
        pump(d);
      },
      Math.max(0, at - Date.now()),
    );
    d.timer.unref();
  }

  // Hands ready messages to idle subscribers; one message at a time per subscriber.
  function pump(d: Durable) {
    if (closed) return;
    const now = Date.now();
    for (const sub of d.subs) {
      if (sub.busy || !sub.active) continue;
      const idx = d.queue.findIndex((p) => p.notBefore <= now);
      if (idx < 0) break;
      const [p] = d.queue.splice(idx, 1);
      sub.busy = true;
      sub.inflight = deliver(d, sub, p).finally(() => {
        sub.busy = false;
        sub.inflight = undefined;
        setImmediate(() => pump(d));
      });
    }
    const next = d.queue.reduce((m, p) => Math.min(m, p.notBefore), Number.POSITIVE_INFINITY);
    if (next > now && next !== Number.POSITIVE_INFINITY) schedule(d, next);
  }

  async function deliver(d: Durable, sub: Subscriber, p: Pending) {
    p.deliveries++;
    const m: EventMessage = {
      ...p.msg,
      headers: { ...p.msg.headers },
      redelivered: p.deliveries > 1,
      deliveryCount: p.deliveries,
    };
    try {
      await handleTraced(d.name, m, sub.handler, 'inprocess');
    } catch (err) {
      if (sub.maxDeliver > 0 && p.deliveries >= sub.maxDeliver) {
        log.error({ err, durable: d.name, subject: m.subject, id: m.id, deliveries: p.deliveries }, 'event handler failed, giving up');
        return;
      }
      const delay = retryDelay(p.deliveries, retry);
      log.warn({ err, durable: d.name, subject: m.subject, id: m.id, deliveries: p.deliveries, delay }, 'event handler failed, will retry');
      p.notBefore = Date.now() + delay;
      d.queue.unshift(p);
      schedule(d, p.notBefore);
    }
  }

  return {
    kind: 'inprocess',

    async publish(msg) {
      if (closed) throw new TransientPublishError('transport closed');
      // The same permanent failures as JetStream, so the all-in-one shape dead-letters what NATS would.
      const invalid = invalidPublishSubject(msg.subject);
      if (invalid) throw new PermanentPublishError('invalid_subject', `${invalid}: '${msg.subject}'`);
      if (opts.maxPayload !== undefined && msg.data.byteLength > opts.maxPayload) {
        throw new PermanentPublishError(
          'payload_too_large',
          `payload of ${msg.data.byteLength} bytes exceeds max_payload ${opts.maxPayload}`,
        );
      }
      const now = Date.now();
      trim(now);
      if (seen.has(msg.id)) return;
      seen.set(msg.id, now);
      const copy: OutgoingEvent = { id: msg.id, subject: msg.subject, data: msg.data, headers: { ...msg.headers } };
      history.push({ msg: copy, at: now });
      for (const d of durables.values()) {
        if (!matchesAny(d.subjects, copy.subject)) continue;
        d.queue.push({ msg: copy, deliveries: 0, notBefore: 0 });
        // Async delivery: publish returns after enqueue, like a broker.
        setImmediate(() => pump(d));
      }
    },

    async subscribe(o) {
      if (closed) throw new Error('transport closed');
      const name = sanitizeDurable(o.durable);
      let d = durables.get(name);
      if (!d) {
        // A new durable starts at the retained history (JetStream deliver_policy "all").
        trim(Date.now());
        d = { name, subjects: [...o.subjects], queue: [], subs: new Set() };
        for (const h of history) {
          if (matchesAny(d.subjects, h.msg.subject)) d.queue.push({ msg: h.msg, deliveries: 0, notBefore: 0 });
        }
        durables.set(name, d);
      } else {
        d.subjects = [...o.subjects];
      }
      const sub: Subscriber = { handler: o.handler, maxDeliver: o.maxDeliver ?? -1, busy: false, active: true };
      d.subs.add(sub);
      const dd = d;
      setImmediate(() => pump(dd));
      return {
        async stop() {
          sub.active = false;
          dd.subs.delete(sub);
          await sub.inflight;
        },
      };
    },

    healthy: () => !closed,

    async close() {
      closed = true;
      const inflight: Promise<void>[] = [];
      for (const d of durables.values()) {
        if (d.timer) clearTimeout(d.timer);
        for (const s of d.subs) {
          s.active = false;
          if (s.inflight) inflight.push(s.inflight);
        }
        d.subs.clear();
      }
      await Promise.allSettled(inflight);
    },
  };
}
