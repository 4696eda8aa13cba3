import { createDb, createTestDatabase, type Sql } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/wait.js';
import { MonthBytesCache } from '../src/month-bytes.js';

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let sql: Sql;
let counted: Sql;
let queries = 0;

beforeAll(async () => {
  db = await createTestDatabase(undefined, 'monthbytes');
  sql = createDb(db.url, { schema: 'public', max: 2 });
  // Every query the cache makes goes through here (monthBytes is one tagged-template call).
  counted = ((...args: Parameters<Sql>) => {
    queries++;
    return (sql as unknown as (...a: unknown[]) => unknown)(...args);
  }) as unknown as Sql;
  await sql.unsafe(
    `CREATE TABLE usage_months (tenant_id text NOT NULL, month text NOT NULL, total_bytes bigint NOT NULL, PRIMARY KEY (tenant_id, month))`,
  );
});
afterAll(async () => {
  await sql?.end();
  await db?.drop();
});

describe('MonthBytesCache', () => {
  it('reads a month once per lifetime, shares a read in flight, and never goes back to a smaller total', async () => {
    await sql`INSERT INTO usage_months VALUES ('a', '2026-11', 100)`;
    const cache = new MonthBytesCache(counted, 60_000);
    queries = 0;
    expect(await Promise.all([cache.get('a', '2026-11'), cache.get('a', '2026-11'), cache.get('a', '2026-11')])).toEqual([100, 100, 100]);
    expect(queries).toBe(1);
    expect(await cache.get('a', '2026-11')).toBe(100);
    expect(queries).toBe(1);
    // This replica's update raises it; an older total arriving later (batches committing out of order) does not lower it.
    cache.applied(new Map([['a|2026-11', 300]]));
    cache.applied(new Map([['a|2026-11', 200]]));
    expect(await cache.get('a', '2026-11')).toBe(300);
    // A tenant never seen: no row is 0; another month is its own entry.
    expect(await cache.get('b', '2026-11')).toBe(0);
    expect(await cache.get('a', '2026-12')).toBe(0);
    expect(queries).toBe(3);
  });

  it('reads again once the lifetime is over; with no lifetime every get reads', async () => {
    await sql`INSERT INTO usage_months VALUES ('c', '2026-11', 5)`;
    const short = new MonthBytesCache(counted, 50);
    expect(await short.get('c', '2026-11')).toBe(5);
    await sql`UPDATE usage_months SET total_bytes = 7 WHERE tenant_id = 'c'`;
    expect(await short.get('c', '2026-11')).toBe(5);
    await waitFor(async () => (await short.get('c', '2026-11')) === 7, { message: 'the 50 ms lifetime to be over (7 read)' });
    const none = new MonthBytesCache(counted, 0);
    queries = 0;
    await none.get('c', '2026-11');
    await none.get('c', '2026-11');
    expect(queries).toBe(2);
  });

  it('keeps at most maxEntries months, dropping the oldest', async () => {
    const cache = new MonthBytesCache(counted, 60_000, 2);
    cache.applied(
      new Map([
        ['x|2026-11', 1],
        ['y|2026-11', 2],
        ['z|2026-11', 3],
      ]),
    );
    queries = 0;
    expect(await cache.get('z', '2026-11')).toBe(3);
    expect(await cache.get('y', '2026-11')).toBe(2);
    expect(queries).toBe(0);
    expect(await cache.get('x', '2026-11')).toBe(0); // dropped: read again (no row here)
    expect(queries).toBe(1);
  });
});
