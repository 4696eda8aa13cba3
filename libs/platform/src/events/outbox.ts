import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Sql, TransactionSql } from '../db.js';
import { trackOutboxLag } from '../metrics.js';
import { injectContext, publishTraced } from './trace.js';
import type { EventTransport } from './types.js';

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

/**
 * Records an event in the caller's transaction (ARCHITECTURE rule 3): it exists only if the state
 * change commits. The active trace context rides in the headers. NOTIFY (delivered on commit)
 * wakes the relay at once instead of at its next poll.
 */
export async function writeOutbox(tx: Sql | TransactionSql, event: OutboxEvent): Promise<string> {
  const id = event.id ?? randomUUID();
  const headers = injectContext({ ...(event.headers ?? {}) });
  const payload = toBuffer(event.data);
  // created_at is the relay's order key: clock_timestamp(), not now() (the transaction's start, the
  // same for every row of a transaction), so events written in one transaction (QuotaCrossed 80 then
  // 100) keep their order instead of tying and going out in whatever order the plan returns them.
  // One statement: the row and the NOTIFY (a data-modifying CTE runs even though nothing reads it).
  if (event.schema) {
    await tx`WITH o AS (
        INSERT INTO ${tx(event.schema)}.outbox (id, subject, payload, headers, created_at)
        VALUES (${id}, ${event.subject}, ${payload}, ${tx.json(headers)}, clock_timestamp())
      ) SELECT pg_notify(${outboxChannel(event.schema)}, '')`;
  } else {
    await tx`WITH o AS (
        INSERT INTO outbox (id, subject, payload, headers, created_at)
        VALUES (${id}, ${event.subject}, ${payload}, ${tx.json(headers)}, clock_timestamp())
      ) SELECT pg_notify('outbox_' || current_schema(), '')`;
  }
  return id;
}

export interface OutboxRelayOptions {
  sql: Sql;
  schema: string;
  transport: EventTransport;
  logger: Logger;
  pollMs?: number;
  batch?: number;
  /** Published rows older than this are deleted (default 1 day; 0 keeps them). */
  retainMs?: number;
}

export interface OutboxRelay {
  stop(): Promise<void>;
  /** Unpublished rows (a readiness/metrics signal: grows while the transport is down). */
  lag(): Promise<number>;
}

interface Row {
  id: string;
  subject: string;
  payload: Buffer;
  headers: Record<string, string> | null;
}

/**
 * Publishes outbox rows in created_at order and marks them. Rows are claimed with
 * FOR UPDATE SKIP LOCKED, so several replicas can relay the same schema; a publish failure
 * leaves the row (and those after it, to keep order) for the next round. A crash between
 * publish and mark re-publishes with the same id, which the stream's duplicate window drops.
 */
export async function startOutboxRelay(opts: OutboxRelayOptions): Promise<OutboxRelay> {
  const { sql, schema, transport } = opts;
  const log = opts.logger.child({ component: 'outbox-relay', schema });
  const pollMs = opts.pollMs ?? 500;
  const batch = opts.batch ?? 100;
  const retainMs = opts.retainMs ?? 86_400_000;
  let stopped = false;
  let kicked = false;
  let wake: (() => void) | undefined;
  let lastCleanup = 0;
  let failing = false;

  const kick = () => {
    kicked = true;
    wake?.();
  };

  // Publishes one batch; true when there may be more right away.
  async function round(): Promise<boolean> {
    const result = await sql.begin(async (tx) => {
      const rows = (await tx`
        SELECT id, subject, payload, headers FROM ${tx(schema)}.outbox
        WHERE published_at IS NULL ORDER BY created_at
        LIMIT ${batch} FOR UPDATE SKIP LOCKED`) as unknown as Row[];
      const done: string[] = [];
      for (const r of rows) {
        try {
          await publishTraced(transport, { id: r.id, subject: r.subject, data: new Uint8Array(r.payload), headers: r.headers ?? {} });
          done.push(r.id);
        } catch (err) {
          if (!failing) log.warn({ err, id: r.id, subject: r.subject }, 'outbox publish failed; will retry');
          failing = true;
          break;
        }
      }
      if (done.length > 0) {
        await tx`UPDATE ${tx(schema)}.outbox SET published_at = now() WHERE id = ANY(${done}::uuid[])`;
        if (failing && done.length === rows.length) log.info('outbox publishing again');
        if (done.length === rows.length) failing = false;
      }
      return { full: rows.length === batch && done.length === rows.length };
    });
    return (result as { full: boolean }).full;
  }

  async function cleanup() {
    if (retainMs <= 0 || Date.now() - lastCleanup < 600_000) return;
    lastCleanup = Date.now();
    const r = await sql`DELETE FROM ${sql(schema)}.outbox WHERE published_at < now() - ${`${retainMs} milliseconds`}::interval`;
    if (r.count > 0) log.debug({ deleted: r.count }, 'outbox cleanup');
  }

  let listener: { unlisten: () => Promise<void> } | undefined;
  try {
    // onlisten also fires after the LISTEN connection comes back: catch up on what was missed.
    listener = await sql.listen(outboxChannel(schema), kick, kick);
  } catch (err) {
    log.warn({ err }, 'LISTEN failed; relying on polling');
  }

  const loop = (async () => {
    while (!stopped) {
      let more = false;
      try {
        more = await round();
        await cleanup();
      } catch (err) {
        log.warn({ err }, 'outbox relay round failed');
      }
      if (more || stopped) continue;
      if (kicked) {
        kicked = false;
        continue;
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, pollMs);
        wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      wake = undefined;
      kicked = false;
    }
  })();

  // imagegen_outbox_lag on /metrics (ops).
  const untrackLag = trackOutboxLag(schema, async () => {
    const [r] = await sql`SELECT count(*)::int AS n FROM ${sql(schema)}.outbox WHERE published_at IS NULL`;
    return r.n as number;
  });

  return {
    async stop() {
      if (stopped) return;
      stopped = true;
      untrackLag();
      wake?.();
      await loop;
      await listener?.unlisten().catch(() => {});
    },
    async lag() {
      const [r] = await sql`SELECT count(*)::int AS n FROM ${sql(schema)}.outbox WHERE published_at IS NULL`;
      return r.n as number;
    },
  };
}
