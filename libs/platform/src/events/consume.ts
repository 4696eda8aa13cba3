import type { Sql, TransactionSql } from '../db.js';

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
