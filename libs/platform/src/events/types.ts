/** A message on the event bus. `id` is the event id (outbox row id), used for dedupe end to end. */
export interface EventMessage {
  id: string;
  subject: string;
  data: Uint8Array;
  headers: Record<string, string>;
  redelivered?: boolean;
  deliveryCount?: number;
}

export type OutgoingEvent = Omit<EventMessage, 'redelivered' | 'deliveryCount'>;

export interface Subscription {
  /** Stops taking new messages, waits for the in-flight handler, then returns. */
  stop(): Promise<void>;
}

export interface SubscribeOptions {
  /** Durable consumer name: its position survives restarts and re-subscriptions. */
  durable: string;
  /** Subjects (NATS wildcards allowed: `*` one token, `>` the rest). */
  subjects: string[];
  /** Resolving acks the message; throwing makes it come back later (with backoff). */
  handler: (m: EventMessage) => Promise<void>;
  /** Give up after this many deliveries (default: never). */
  maxDeliver?: number;
  /** How long a delivery may stay unacked before the broker redelivers it (default 30 s). */
  ackWaitMs?: number;
}

export interface EventTransport {
  readonly kind: 'nats' | 'inprocess';
  /** Idempotent by id: the same id within the duplicate window is stored once. */
  publish(msg: OutgoingEvent): Promise<void>;
  subscribe(opts: SubscribeOptions): Promise<Subscription>;
  healthy(): boolean;
  close(): Promise<void>;
}

/** Redelivery backoff after a handler failure: base * 2^(n-1), capped. */
export interface RetryPolicy {
  baseMs: number;
  maxMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { baseMs: 250, maxMs: 30_000 };

export function retryDelay(deliveryCount: number, p: RetryPolicy = DEFAULT_RETRY): number {
  const n = Math.max(1, deliveryCount);
  return Math.min(p.maxMs, p.baseMs * 2 ** Math.min(n - 1, 20));
}
