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
  /**
   * Every process gets every message (cache invalidation), instead of the replicas sharing the durable's
   * messages: on NATS the durable gets this process's id as a suffix, starts at new messages and is removed
   * on stop (or by the server an hour after its process died). The in-process transport is one process.
   */
  perInstance?: boolean;
}

export interface EventTransport {
  readonly kind: 'nats' | 'inprocess';
  /**
   * Idempotent by id: the same id within the duplicate window is stored once. Throws
   * PermanentPublishError when this message can never be published as is, TransientPublishError
   * when the bus itself failed (unreachable, timeout, closing); see classifyPublishError.
   */
  publish(msg: OutgoingEvent): Promise<void>;
  subscribe(opts: SubscribeOptions): Promise<Subscription>;
  healthy(): boolean;
  close(): Promise<void>;
  /**
   * Calls `listener` when the bus lost what it had stored (its stream was re-created: a NATS node restarted
   * with an empty store, or the stream was deleted). Outbox relays then send again what consumers may not
   * have read yet (consumers are idempotent by event id). Returns the unsubscribe. Absent: cannot happen.
   */
  onStreamReset?(listener: () => void): () => void;
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

/** Why a message can never be published as is (the outbox relay dead-letters it at once). */
export type PermanentPublishReason = 'payload_too_large' | 'invalid_subject' | 'no_stream';

/** This message can never be published as is: retrying cannot help. */
export class PermanentPublishError extends Error {
  override readonly name = 'PermanentPublishError';
  constructor(
    readonly reason: PermanentPublishReason,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The bus failed, not the message (unreachable, timeout, closing): retry the same message later. */
export class TransientPublishError extends Error {
  override readonly name = 'TransientPublishError';
}

/** Node socket errors and NATS client errors that mean "the bus is unreachable right now". */
const TRANSIENT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);
const TRANSIENT_NAMES = new Set(['TimeoutError', 'ConnectionError', 'ClosedConnectionError', 'DrainingConnectionError']);

/**
 * How the outbox relay treats a publish failure:
 * - `permanent` (PermanentPublishError): dead-letter the event now;
 * - `transient` (TransientPublishError, a socket/connection/timeout error, or an unhealthy transport):
 *   retry the same event forever, keeping order; it never counts as an attempt;
 * - `unknown` (anything else): retry, but dead-letter the event after maxAttempts such failures.
 */
export function classifyPublishError(err: unknown, transportHealthy = true): 'permanent' | 'transient' | 'unknown' {
  if (err instanceof PermanentPublishError) return 'permanent';
  if (err instanceof TransientPublishError) return 'transient';
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if ((typeof code === 'string' && TRANSIENT_CODES.has(code)) || TRANSIENT_NAMES.has(e.name)) return 'transient';
  }
  return transportHealthy ? 'unknown' : 'transient';
}
