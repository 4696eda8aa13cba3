import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type postgres from 'postgres';
import { NO_FLUSH_CTE, type Sql, type TransactionSql } from '../db.js';
import { durationFromEnv } from '../env.js';
import { recordOutboxDeadLettered, trackOutboxDeadLetters, trackOutboxLag } from '../metrics.js';
import { injectContext, publishTraced } from './trace.js';
import { classifyPublishError, type EventTransport, type PermanentPublishError } from './types.js';

export interface OutboxEvent {
  subject: string;
  data: Uint8Array;
  headers?: Record<string, string>;
  /** Event id (default: a new uuid v4); it becomes the JetStream Nats-Msg-Id. */
  id?: string;
  /** Owner schema; default: the connection's search_path (current_schema()). */
  schema?: string;
}

/** NOTIFY channel the relay of `schema` listens on. */
export function outboxChannel(schema: string): string {
  return `outbox_${schema}`;
}

const toBuffer = (d: Uint8Array) => Buffer.from(d.buffer, d.byteOffset, d.byteLength);

/** A piece of SQL to interpolate into a statement. */
export type SqlFragment = postgres.PendingQuery<postgres.Row[]>;
type Fragment = SqlFragment;

/** The outbox table of `schema`, or of the connection's search_path. */
const outboxTable = (tx: Sql | TransactionSql, schema?: string): Fragment => (schema ? tx`${tx(schema)}.outbox` : tx`outbox`);

/** The NOTIFY that wakes the relay of the event's schema (delivered on commit). */
const notifyRelay = (tx: Sql | TransactionSql, schema?: string): Fragment =>
  schema ? tx`pg_notify(${outboxChannel(schema)}, '')` : tx`pg_notify('outbox_' || current_schema(), '')`;

/**
 * The outbox row of `event` as `INSERT ... SELECT` for a data-modifying CTE of the caller's statement, written
 * once per row of the CTE named `onePerRowOf` (none when it is empty), and the NOTIFY expression to select with
 * it: a state change and its event in one statement, atomic without a transaction.
 * created_at is the relay's order key: clock_timestamp(), not now() (the transaction's start, the same for
 * every row of a transaction), so events written in one transaction (QuotaCrossed 80 then 100) keep their
 * order instead of tying and going out in whatever order the plan returns them.
 */
export function outboxInsert(
  tx: Sql | TransactionSql,
  event: OutboxEvent,
  onePerRowOf?: string,
  opts: { direct?: boolean } = {},
): { id: string; insert: Fragment; notify: Fragment; event: DirectEvent } {
  const id = event.id ?? randomUUID();
  const headers = injectContext({ ...(event.headers ?? {}) });
  const insert: Fragment = tx`INSERT INTO ${outboxTable(tx, event.schema)} (id, subject, payload, headers, created_at, relay_after)
    SELECT ${id}, ${event.subject}, ${toBuffer(event.data)}, ${tx.json(headers)}, clock_timestamp(), ${relayAfter(tx, opts.direct)}
    ${onePerRowOf ? tx`FROM ${tx(onePerRowOf)}` : tx``}`;
  return {
    id,
    insert,
    notify: opts.direct ? tx`NULL` : notifyRelay(tx, event.schema),
    event: { id, subject: event.subject, data: event.data, headers },
  };
}

/**
 * DIRECT_PUBLISH_GRACE_MS: how long the relay leaves a row alone that its writer publishes itself (DirectPublisher):
 * past it (the writer died before publishing, or its mark is late) the relay publishes it as any other row.
 */
export const DIRECT_PUBLISH_GRACE_MS = durationFromEnv('DIRECT_PUBLISH_GRACE_MS', 10_000);

/** The relay_after of a new row: NULL (the relay publishes it at once) or, for a direct one, the end of its grace. */
const relayAfter = (tx: Sql | TransactionSql, direct?: boolean): Fragment =>
  direct ? tx`clock_timestamp() + ${`${DIRECT_PUBLISH_GRACE_MS} milliseconds`}::interval` : tx`NULL::timestamptz`;

/**
 * Outbox rows of several events of one subject for a data-modifying CTE, each written only when its `key` is
 * among the `column` values of the CTE named `onlyFor` (e.g. the rows the same statement actually moved), in the
 * order given; with the NOTIFY expression to select with them. The events' payloads are made before the
 * statement, so a state change and its events still go out as one statement.
 */
export function outboxInsertKeyed(
  tx: Sql | TransactionSql,
  subject: string,
  events: { key: number; data: Uint8Array }[],
  onlyFor: { cte: string; column: string },
  schema?: string,
  opts: { direct?: boolean } = {},
): { insert: Fragment; notify: Fragment; events: Map<number, DirectEvent> } {
  const headers = injectContext({});
  const written = new Map(events.map((e) => [e.key, { id: randomUUID(), subject, data: e.data, headers }]));
  // The payloads travel as base64 text: postgres.js does not send an array of Buffers as bytea[].
  const insert: Fragment = tx`INSERT INTO ${outboxTable(tx, schema)} (id, subject, payload, headers, created_at, relay_after)
    SELECT e.id, ${subject}, decode(e.payload, 'base64'), ${tx.json(headers)}, clock_timestamp(), ${relayAfter(tx, opts.direct)}
    FROM unnest(${events.map((e) => e.key)}::bigint[], ${events.map((e) => toBuffer(e.data).toString('base64'))}::text[],
      ${events.map((e) => (written.get(e.key) as DirectEvent).id)}::uuid[]) WITH ORDINALITY AS e(k, payload, id, n)
    JOIN ${tx(onlyFor.cte)} AS c ON c.${tx(onlyFor.column)} = e.k
    ORDER BY e.n`;
  return { insert, notify: opts.direct ? tx`NULL` : notifyRelay(tx, schema), events: written };
}

/**
 * Records an event in the caller's transaction (ARCHITECTURE rule 3): it exists only if the state
 * change commits. The active trace context rides in the headers. NOTIFY (delivered on commit)
 * wakes the relay at once instead of at its next poll.
 */
export async function writeOutbox(tx: Sql | TransactionSql, event: OutboxEvent): Promise<string> {
  const { id, insert, notify } = outboxInsert(tx, event);
  // One statement: the row and the NOTIFY (a data-modifying CTE runs even though nothing reads it).
  await tx`WITH o AS (${insert}) SELECT ${notify}`;
  return id;
}

export interface OutboxRelayOptions {
  sql: Sql;
  schema: string;
  transport: EventTransport;
  logger: Logger;
  /** Idle poll; default 500 ms, 5 s while LISTEN works (NOTIFY wakes the relay; the poll catches rows written without one). */
  pollMs?: number;
  batch?: number;
  /** Published rows older than this are deleted (default 1 day; 0 keeps them). */
  retainMs?: number;
  /**
   * Failed publishes of one event with an unclassified error (classifyPublishError 'unknown') after
   * which it is dead-lettered; retries back off from pollMs, doubling up to 30 s. Permanent failures
   * are dead-lettered at once; bus outages (transient) never count. Default: OUTBOX_MAX_ATTEMPTS or 10.
   */
  maxAttempts?: number;
}

/** An event as its outbox row holds it: what a direct publish sends. */
export interface DirectEvent {
  id: string;
  subject: string;
  data: Uint8Array;
  headers: Record<string, string>;
}

/**
 * Publishing by the writer itself. A writer that asks `ready()` before its statement writes its rows `direct`
 * (outboxInsert / outboxInsertKeyed: relay_after at the end of DIRECT_PUBLISH_GRACE_MS, no NOTIFY) and, once the
 * statement committed, hands the events it wrote to `publish`: they go out at once, in the order given, and their
 * rows are marked published in batches. No relay round (a transaction: the claim, then the marks) per event, and no
 * NOTIFY. The relay stays the safety net: a row whose writer died before publishing is published by it once the
 * grace has passed, as is one whose mark was lost (again, with the same id: the bus's duplicate window drops it,
 * and consumers are idempotent anyway).
 */
export interface DirectPublisher {
  /**
   * Whether events may go out directly now: the bus is up, and no direct publish has failed since the relay last
   * found nothing left to publish (after a failure, events go through the relay, in order, until it has caught up).
   */
  ready(): boolean;
  /**
   * Publishes the events of rows written `direct` whose statement committed, after the ones handed over before.
   * Never throws: a publish that fails hands its event, and those after it, to the relay at once.
   */
  publish(events: Iterable<DirectEvent>): void;
}

export interface OutboxRelay {
  /** Direct publishing for this schema's writers in this process (see DirectPublisher). */
  direct: DirectPublisher;
  stop(): Promise<void>;
  /** Unpublished rows (a readiness/metrics signal: grows while the transport is down). */
  lag(): Promise<number>;
  /** Rows in this schema's outbox_dead_letter table (never published until replayed; docs/design/ops.md). */
  deadLetters(): Promise<number>;
}

interface Row {
  id: string;
  subject: string;
  payload: Buffer;
  headers: Record<string, string> | null;
  attempts: number;
}

interface DeadLetter {
  row: Row;
  reason: string;
  error: string;
  attempts: number;
}

export const DEFAULT_OUTBOX_MAX_ATTEMPTS = 10;
/** OUTBOX_REPUBLISH_WINDOW_MS: after the bus lost its stored events, events published this recently are sent again. */
export const REPUBLISH_WINDOW_MS = durationFromEnv('OUTBOX_REPUBLISH_WINDOW_MS', 15 * 60_000);
const MAX_RETRY_DELAY_MS = 30_000;
/** Directly published events are marked in one statement at most this long after they went out. */
const MARK_DELAY_MS = 250;
/** Marks kept for a retry while the database cannot take them (the relay re-publishes the rest after their grace). */
const MARKS_KEPT = 10_000;
/** Default idle poll of a relay whose LISTEN works: rows written without NOTIFY (a manual replay) wait at most this long. */
const LISTENING_POLL_MS = 5_000;

/** OUTBOX_MAX_ATTEMPTS (validated by loadConfig in real processes), else the default. */
function maxAttemptsFromEnv(): number {
  const n = Number(process.env.OUTBOX_MAX_ATTEMPTS?.trim() || Number.NaN);
  return Number.isInteger(n) && n >= 1 ? n : DEFAULT_OUTBOX_MAX_ATTEMPTS;
}

const errorText = (err: unknown) => {
  const e = err as Error | undefined;
  const text = e instanceof Error ? `${e.name}: ${e.message}` : String(err);
  return text.length > 2000 ? `${text.slice(0, 2000)}...` : text;
};

/**
 * Publishes outbox rows in created_at order and marks them. Several replicas can relay the same schema:
 * one at a time (a transaction-scoped advisory lock per schema), so rows go out in order; rows are also
 * claimed with FOR UPDATE SKIP LOCKED. A crash between publish
 * and mark re-publishes with the same id, which the stream's duplicate window drops.
 *
 * Failures (classifyPublishError): a transient one (bus down, timeout) leaves the row, and those
 * after it to keep order, for the next poll, forever. A permanent one (payload too large, invalid
 * subject, no stream for the subject) moves the row to `outbox_dead_letter` in the same schema and
 * goes on with the next rows; so does an unclassified failure once it happened maxAttempts times for
 * that row (counted in outbox.attempts; until then the relay retries it in order with backoff).
 */
export async function startOutboxRelay(opts: OutboxRelayOptions): Promise<OutboxRelay> {
  const { sql, schema, transport } = opts;
  const log = opts.logger.child({ component: 'outbox-relay', schema });
  const pollMs = opts.pollMs ?? 500;
  /** The idle wait while LISTEN works (NOTIFY kicks the relay at once; the poll only catches rows written without one). */
  const listeningPollMs = opts.pollMs ?? LISTENING_POLL_MS;
  const batch = opts.batch ?? 100;
  const retainMs = opts.retainMs ?? 86_400_000;
  const maxAttempts = Math.max(1, Math.floor(opts.maxAttempts ?? maxAttemptsFromEnv()));
  let stopped = false;
  let kicked = false;
  /** Ends the current sleep; NOTIFY kicks use it only outside a retry delay. */
  let wake: (() => void) | undefined;
  let retryDelaying = false;
  let lastCleanup = 0;
  let failing = false;

  const kick = () => {
    kicked = true;
    if (!retryDelaying) wake?.();
  };

  // ---- direct publishing (DirectPublisher) ----
  /**
   * False from a failed direct publish until a relay round that started after its rows were handed over finds
   * nothing left: events then keep their order. rounds counts the relay's rounds; resumeFrom is the first round that
   * may turn it back on (none while a hand-over is under way: Infinity).
   */
  let directOk = true;
  let rounds = 0;
  let resumeFrom = 0;
  let handingOver = 0;
  /** Direct publishes run one after the other, in the order handed over. */
  let publishing: Promise<void> = Promise.resolve();
  /** Ids published directly and not yet marked; marked in one statement at most MARK_DELAY_MS later. */
  let toMark: string[] = [];
  let markTimer: NodeJS.Timeout | undefined;
  let marking: Promise<void> = Promise.resolve();

  const markNow = () => {
    if (markTimer) clearTimeout(markTimer);
    markTimer = undefined;
    const ids = toMark;
    toMark = [];
    if (ids.length === 0) return marking;
    marking = marking.then(async () => {
      try {
        // No flush wait (NO_FLUSH_CTE): a mark lost in a crash only means the relay publishes the event again, and
        // consumers drop a message id they have seen.
        await sql`WITH ${sql.unsafe(NO_FLUSH_CTE)} UPDATE ${sql(schema)}.outbox SET published_at = now()
          WHERE id = ANY(${ids}::uuid[]) AND published_at IS NULL AND (SELECT off FROM no_flush) IS NOT NULL`;
      } catch (err) {
        // Kept for the next mark (bounded): a row never marked is published again by the relay after its grace.
        toMark = [...ids, ...toMark].slice(-MARKS_KEPT);
        log.warn({ err, events: ids.length }, 'could not mark directly published events; retrying');
        scheduleMark();
      }
    });
    return marking;
  };
  const scheduleMark = () => {
    if (toMark.length >= batch) void markNow();
    else if (!markTimer && !stopped) markTimer = setTimeout(() => void markNow(), MARK_DELAY_MS);
  };

  /** Hands rows written `direct` to the relay now instead of after their grace (a direct publish failed). */
  const handOver = async (ids: string[]) => {
    handingOver++;
    resumeFrom = Number.POSITIVE_INFINITY;
    try {
      await sql`UPDATE ${sql(schema)}.outbox SET relay_after = NULL WHERE id = ANY(${ids}::uuid[]) AND published_at IS NULL`;
    } catch (err) {
      log.warn({ err, events: ids.length }, 'could not hand directly written events to the relay; it takes them after their grace');
    } finally {
      handingOver--;
      if (handingOver === 0) resumeFrom = rounds + 1;
    }
    kick();
  };

  const direct: DirectPublisher = {
    ready: () => directOk && !stopped && transport.healthy(),
    publish(events) {
      const list = [...events];
      if (list.length === 0) return;
      publishing = publishing.then(async () => {
        for (let i = 0; i < list.length; i++) {
          if (!directOk || stopped) return handOver(list.slice(i).map((e) => e.id));
          try {
            await publishTraced(transport, list[i]);
            toMark.push(list[i].id);
            scheduleMark();
          } catch (err) {
            directOk = false;
            log.warn({ err, id: list[i].id, subject: list[i].subject }, 'direct publish failed; the relay publishes from here, in order');
            return handOver(list.slice(i).map((e) => e.id));
          }
        }
      });
    },
  };

  // Publishes one batch. more: there may be more right away; retryInMs: a row failed, wait this long.
  async function round(): Promise<{ more: boolean; retryInMs?: number }> {
    const dead: DeadLetter[] = [];
    const result = await sql.begin(async (tx) => {
      // One relay per schema at a time (the lock ends with the transaction, a crashed holder's with its
      // connection): two replicas relaying disjoint batches at once could publish an aggregate's later
      // event before its earlier one. The other replicas get no rows and poll again. The lock is taken in
      // the claiming statement, once and before any row is read: a one-time filter (InitPlan) on a
      // MATERIALIZED CTE.
      const rows = (await tx`
        WITH relaying AS MATERIALIZED (SELECT pg_try_advisory_xact_lock(hashtext(${`imagegen-outbox:${schema}`})) AS ok)
        SELECT id, subject, payload, headers, attempts FROM ${tx(schema)}.outbox
        WHERE (SELECT ok FROM relaying) AND published_at IS NULL AND (relay_after IS NULL OR relay_after <= now()) ORDER BY created_at
        LIMIT ${batch} FOR UPDATE SKIP LOCKED`) as unknown as Row[];
      const done: string[] = [];
      let retryInMs: number | undefined;
      for (const r of rows) {
        try {
          await publishTraced(transport, { id: r.id, subject: r.subject, data: new Uint8Array(r.payload), headers: r.headers ?? {} });
          done.push(r.id);
        } catch (err) {
          const kind = classifyPublishError(err, transport.healthy());
          if (kind === 'permanent') {
            dead.push({ row: r, reason: (err as PermanentPublishError).reason, error: errorText(err), attempts: r.attempts + 1 });
            continue;
          }
          if (kind === 'unknown') {
            const attempts = r.attempts + 1;
            if (attempts >= maxAttempts) {
              dead.push({ row: r, reason: 'max_attempts', error: errorText(err), attempts });
              continue;
            }
            await tx`UPDATE ${tx(schema)}.outbox SET attempts = ${attempts}, last_error = ${errorText(err)} WHERE id = ${r.id}`;
            retryInMs = Math.max(pollMs, Math.min(MAX_RETRY_DELAY_MS, pollMs * 2 ** Math.min(attempts - 1, 20)));
            log.warn(
              { err, id: r.id, subject: r.subject, attempts, maxAttempts, retryInMs },
              'outbox publish failed; will retry, then dead-letter',
            );
          } else {
            if (!failing) log.warn({ err, id: r.id, subject: r.subject }, 'outbox publish failed (bus unavailable); will retry');
            retryInMs = pollMs;
          }
          failing = true;
          break; // keep order: nothing after this row goes out before it
        }
      }
      const writes: PromiseLike<unknown>[] = [];
      if (done.length > 0) {
        writes.push(tx`UPDATE ${tx(schema)}.outbox SET published_at = now() WHERE id = ANY(${done}::uuid[])`);
      }
      for (const d of dead) {
        // Moved aside in the same transaction as the marks: payload and headers kept for inspection and replay.
        writes.push(tx`WITH moved AS (
            DELETE FROM ${tx(schema)}.outbox WHERE id = ${d.row.id}
            RETURNING id, subject, payload, headers, created_at
          )
          INSERT INTO ${tx(schema)}.outbox_dead_letter (id, subject, payload, headers, created_at, attempts, reason, error)
          SELECT id, subject, payload, headers, created_at, ${d.attempts}, ${d.reason}, ${d.error} FROM moved
          ON CONFLICT (id) DO UPDATE SET subject = excluded.subject, payload = excluded.payload, headers = excluded.headers,
            created_at = excluded.created_at, attempts = excluded.attempts, reason = excluded.reason, error = excluded.error,
            dead_lettered_at = now()`);
      }
      // The marks and the moves are sent together (one write), before COMMIT.
      await Promise.all(writes);
      if (retryInMs === undefined && failing && done.length > 0) {
        log.info('outbox publishing again');
        failing = false;
      }
      return { more: rows.length === batch && retryInMs === undefined, retryInMs };
    });
    for (const d of dead) {
      recordOutboxDeadLettered(schema, d.reason);
      log.error(
        { id: d.row.id, subject: d.row.subject, reason: d.reason, attempts: d.attempts, error: d.error, bytes: d.row.payload.byteLength },
        'outbox event dead-lettered (moved to outbox_dead_letter); publishing the next ones',
      );
    }
    return result as { more: boolean; retryInMs?: number };
  }

  async function cleanup() {
    if (retainMs <= 0 || Date.now() - lastCleanup < 600_000) return;
    lastCleanup = Date.now();
    const r = await sql`DELETE FROM ${sql(schema)}.outbox WHERE published_at < now() - ${`${retainMs} milliseconds`}::interval`;
    if (r.count > 0) log.debug({ deleted: r.count }, 'outbox cleanup');
  }

  // The bus lost its stored events (stream re-created): send again what was published recently, which
  // consumers may not have read yet. They are idempotent by event id, so what they did read counts once.
  const republishWindowMs = Math.min(retainMs > 0 ? retainMs : Number.POSITIVE_INFINITY, REPUBLISH_WINDOW_MS);
  const unsubscribeReset = transport.onStreamReset?.(() => {
    toMark = []; // published into the lost stream: sent again with the rest
    sql`UPDATE ${sql(schema)}.outbox SET published_at = NULL
        WHERE published_at > now() - ${`${republishWindowMs} milliseconds`}::interval`
      .then((r) => {
        log.warn({ events: r.count, windowMs: republishWindowMs }, 'the bus lost its stored events: re-sending recent ones');
        kick();
      })
      .catch((err) => log.error({ err }, 'could not schedule recent events for re-sending'));
  });

  let listener: { unlisten: () => Promise<void> } | undefined;
  try {
    // onlisten also fires after the LISTEN connection comes back: catch up on what was missed.
    listener = await sql.listen(outboxChannel(schema), kick, kick);
  } catch (err) {
    log.warn({ err }, 'LISTEN failed; relying on polling');
  }

  const loop = (async () => {
    while (!stopped) {
      let next: { more: boolean; retryInMs?: number } = { more: false };
      try {
        const thisRound = ++rounds;
        next = await round();
        // Nothing left for the relay, handed-over rows included: direct publishing may go on without passing any.
        if (!next.more && next.retryInMs === undefined && !directOk && thisRound >= resumeFrom) {
          directOk = true;
          log.info('direct publishing again');
        }
        await cleanup();
      } catch (err) {
        log.warn({ err }, 'outbox relay round failed');
      }
      if (stopped) continue;
      if (next.retryInMs === undefined) {
        if (next.more) continue;
        if (kicked) {
          kicked = false;
          continue;
        }
      }
      // After a failed publish new rows (NOTIFY) do not shorten the wait: they queue behind the failed one.
      retryDelaying = next.retryInMs !== undefined;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, next.retryInMs ?? (listener ? listeningPollMs : pollMs));
        wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      wake = undefined;
      retryDelaying = false;
      kicked = false;
    }
  })();

  const lag = async () => {
    const [r] = await sql`SELECT count(*)::int AS n FROM ${sql(schema)}.outbox WHERE published_at IS NULL`;
    return r.n as number;
  };
  const deadLetters = async () => {
    const [r] = await sql`SELECT count(*)::int AS n FROM ${sql(schema)}.outbox_dead_letter`;
    return r.n as number;
  };
  // imagegen_outbox_lag and imagegen_outbox_dead_letters on /metrics (ops).
  const untrackLag = trackOutboxLag(schema, lag);
  const untrackDead = trackOutboxDeadLetters(schema, deadLetters);

  return {
    direct,
    async stop() {
      if (stopped) return;
      stopped = true;
      untrackLag();
      untrackDead();
      wake?.();
      unsubscribeReset?.();
      await loop;
      // Direct publishes handed over before the stop go out (or to the relay's rows), and their marks are written.
      await publishing;
      await markNow();
      await listener?.unlisten().catch(() => {});
    },
    lag,
    deadLetters,
  };
}
