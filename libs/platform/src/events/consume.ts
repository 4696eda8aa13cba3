import type { Sql, TransactionSql } from '../db.js';
import type { Logger } from '../logger.js';
import type { EventMessage } from './types.js';

/**
 * Runs `fn` at most once per (consumer, eventId): the dedupe row and fn's writes commit together.
 * Returns false (fn skipped) when the event was already processed. Call it inside the transport
 * handler so the ack follows the commit.
 */
export async function consumeOnce(
  sql: Sql,
  consumer: string,
  eventId: string,
  fn: (tx: TransactionSql) => Promise<void>,
): Promise<boolean> {
  const done = await sql.begin(async (tx) => {
    // A concurrent duplicate blocks on the primary key until the first commits or rolls back.
    const rows = await tx`
      INSERT INTO processed_events (consumer, event_id) VALUES (${consumer}, ${eventId})
      ON CONFLICT DO NOTHING RETURNING 1 AS inserted`;
    if (rows.length === 0) return false;
    await fn(tx);
    return true;
  });
  return done as boolean;
}

/**
 * Decodes an event's protobuf payload. A payload that cannot be decoded is logged and skipped (undefined,
 * so the handler returns and the message is acked): redelivering it would fail the same way forever.
 */
export function decodeOrSkip<T>(type: { decode(data: Uint8Array): T }, m: EventMessage, log: Logger): T | undefined {
  try {
    return type.decode(m.data);
  } catch (err) {
    log.error({ err, id: m.id, subject: m.subject }, 'undecodable event skipped');
    return undefined;
  }
}
