import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOTAL_CAP } from '../src/images/list-query.js';
import { type LibraryHarness, startLibrary } from './support.js';

/**
 * ListSessions at scale (issue 16): keyset cursors in the list order (ties on last_activity_at broken by
 * session_id) and a total counted up to TOTAL_CAP.
 */
let h: LibraryHarness;
beforeAll(async () => {
  h = await startLibrary();
});
afterAll(async () => {
  await h?.stop();
});

/** `count` sessions of `tenantId`, one INSERT; groups of `tie` share a last_activity_at (as one transaction's now()). */
const insertSessions = (tenantId: string, count: number, tie = 1, prefix = 's') =>
  h.sql`INSERT INTO sessions (tenant_id, session_id, last_activity_at)
    SELECT ${tenantId}, ${prefix} || lpad(g::text, 5, '0'), timestamptz '2026-01-01' - (g / ${tie}) * interval '1001 microseconds'
    FROM generate_series(1, ${count}) g`;

const inOrder = async (tenantId: string) =>
  (await h.sql`SELECT session_id FROM sessions WHERE tenant_id = ${tenantId} ORDER BY last_activity_at DESC, session_id`).map(
    (r) => r.session_id as string,
  );

async function pageAll(tenantId: string, limit: number) {
  const ids: string[] = [];
  let cursor: string | undefined;
  for (;;) {
    const r = await h.client.listSessions({ limit, offset: 0, cursor }, h.principal(tenantId));
    ids.push(...r.sessions.map((s) => s.sessionId));
    if (!r.nextCursor) return ids;
    cursor = r.nextCursor;
  }
}

describe('ListSessions cursor and capped total', () => {
  it('counts up to TOTAL_CAP exactly, above it says the total is a lower bound', async () => {
    await insertSessions('tCapExact', TOTAL_CAP);
    const exact = await h.client.listSessions({ limit: 10, offset: 0 }, h.principal('tCapExact'));
    expect(exact).toMatchObject({ total: TOTAL_CAP, totalIsExact: true, limit: 10, offset: 0 });

    await insertSessions('tCap', TOTAL_CAP + 5);
    const first = await h.client.listSessions({ limit: 10, offset: 0 }, h.principal('tCap'));
    expect(first).toMatchObject({ total: TOTAL_CAP, totalIsExact: false });
    // Past the cap, the page itself raises the lower bound.
    const deep = await h.client.listSessions({ limit: 10, offset: TOTAL_CAP }, h.principal('tCap'));
    expect(deep).toMatchObject({ total: TOTAL_CAP + 5, totalIsExact: false });
    expect(deep.nextCursor).toBeUndefined();
    expect(deep.sessions).toHaveLength(5);
  });

  it('pages through every session in list order, across ties, with the last page saying so', async () => {
    await insertSessions('tTie', 230, 7);
    const expected = await inOrder('tTie');
    expect(await pageAll('tTie', 9)).toEqual(expected);
    expect(await pageAll('tTie', 100)).toEqual(expected);
    const last = await h.client.listSessions({ limit: 230, offset: 0 }, h.principal('tTie'));
    expect(last).toMatchObject({ limit: 100, total: 230, totalIsExact: true });
    const all = await h.client.listSessions({ limit: 100, offset: 200 }, h.principal('tTie'));
    expect(all.nextCursor).toBeUndefined();
  });

  it('carries 200-character session ids of any characters', async () => {
    const ids = ['é'.repeat(200), '"\\'.repeat(100), `${'中'.repeat(199)}z`, 'plain'];
    for (const id of ids) {
      await h.sql`INSERT INTO sessions (tenant_id, session_id, last_activity_at) VALUES ('tLong', ${id}, '2026-01-01')`;
    }
    expect(await pageAll('tLong', 1)).toEqual(await inOrder('tLong'));
  });

  it('refuses a changed cursor, another tenant cursor and a cursor with offset', async () => {
    await insertSessions('tBad', 5);
    const r = await h.client.listSessions({ limit: 2, offset: 0 }, h.principal('tBad'));
    const cursor = r.nextCursor as string;
    expect(cursor).toBeTruthy();
    const changed = `${cursor.slice(0, 3)}${cursor[3] === 'A' ? 'B' : 'A'}${cursor.slice(4)}`;
    for (const [tenant, c] of [
      ['tBad', changed],
      ['tTie', cursor],
      ['tBad', 'not-a-cursor'],
      ['tBad', 'x'.repeat(3000)],
    ]) {
      await expect(h.client.listSessions({ limit: 2, offset: 0, cursor: c }, h.principal(tenant))).rejects.toMatchObject({
        status: 400,
        body: { error: 'Invalid request payload', details: ['cursor is invalid'] },
      });
    }
    await expect(h.client.listSessions({ limit: 2, offset: 1, cursor }, h.principal('tBad'))).rejects.toMatchObject({
      status: 400,
      body: { error: 'Invalid request payload', details: ['cursor and offset cannot be combined'] },
    });
  });
});
