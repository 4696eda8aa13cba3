import type postgres from 'postgres';
import type { Sql } from '../db.js';

export type PipelinedSql = postgres.ReservedSql<Record<string, unknown>>;

/**
 * Ends the transaction: the given last statements (postgres.js queries, not yet awaited) and COMMIT go out in
 * one write, in that order. Answers their results.
 */
export type CommitWith = (...last: PromiseLike<unknown>[]) => Promise<unknown[]>;

/**
 * A transaction in fewer round trips than sql.begin (BEGIN, each statement, COMMIT: one round trip each):
 * BEGIN goes out in the same write as the first statement `fn` sends, and `fn` may end with
 * `commit(...lastStatements)`, which sends COMMIT in the same write as its last statements (on a failed one,
 * PostgreSQL turns that COMMIT into a rollback and the failure is thrown). Otherwise COMMIT follows `fn`'s
 * return, and ROLLBACK its throw. The connection is reserved for the transaction and released after it.
 */
export async function pipelinedTransaction<T>(sql: Sql, fn: (tx: PipelinedSql, commit: CommitWith) => Promise<T>): Promise<T> {
  const tx = (await sql.reserve()) as PipelinedSql;
  let ended = false;
  const commit: CommitWith = async (...last) => {
    ended = true;
    const settled = await Promise.allSettled([...last, tx`COMMIT`]);
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    return settled.slice(0, -1).map((s) => (s as PromiseFulfilledResult<unknown>).value);
  };
  try {
    const begun = tx`BEGIN`.execute();
    begun.catch(() => {}); // observed below; a failed BEGIN also fails the statements after it
    try {
      const result = await fn(tx, commit);
      await begun;
      if (!ended) {
        ended = true;
        await tx`COMMIT`;
      }
      return result;
    } catch (err) {
      if (!ended) await tx`ROLLBACK`.catch(() => {}); // a ROLLBACK that fails: the connection is gone with the transaction
      throw err;
    }
  } finally {
    tx.release();
  }
}
