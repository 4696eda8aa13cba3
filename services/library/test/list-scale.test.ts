import { AppError, createDb, type Sql } from '@imagegen/platform';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/wait.js';
import { encodeCursor } from '../src/images/cursor.js';
import { type ImageListFilters, listImages, listImagesJson, normalizeFilters, TOTAL_CAP, TOTAL_WINDOW } from '../src/images/list-query.js';
import { type LibraryHarness, startLibrary } from './support.js';

/**
 * Issue 16: keyset cursors, bounded totals, the same results as the unbounded queries they replaced, and SQL
 * that stops when its caller goes away.
 */
let h: LibraryHarness;

interface Row {
  prompt: string;
  negative: string | null;
  aspect: string;
  size: number;
  at: string;
  operation?: string;
}

async function insert(sql: Sql, tenant: string, rows: Row[]): Promise<number[]> {
  if (rows.length === 0) return [];
  const r = await sql`
    INSERT INTO images (tenant_id, session_id, object_key, thumbnail_key, mime_type, format, width, height, size_bytes,
      thumbnail_size_bytes, prompt, negative_prompt, operation, aspect_ratio, created_at)
    SELECT ${tenant}, 's1', 'tenants/' || ${tenant} || '/images/' || g || '.png', 'tenants/' || ${tenant} || '/thumbnails/' || g || '.webp',
      'image/png', 'png', 1, 1, x.size, 1, x.prompt, x.negative, x.operation, x.aspect, x.at
    FROM ROWS FROM (jsonb_to_recordset(${sql.json(rows.map((r) => ({ ...r, operation: r.operation ?? 'generate' })) as never)})
      AS (prompt text, negative text, aspect text, size bigint, at timestamptz, operation text))
      WITH ORDINALITY AS x(prompt, negative, aspect, size, at, operation, g)
    ORDER BY g
    RETURNING id`;
  return r.map((x) => Number(x.id));
}

/** Bulk rows by generate_series: `n` rows, one a minute back from 2025-06-01, prompt 'p<i> <word>'. */
async function bulk(sql: Sql, tenant: string, n: number): Promise<void> {
  await sql`
    INSERT INTO images (tenant_id, session_id, object_key, thumbnail_key, mime_type, format, width, height, size_bytes,
      thumbnail_size_bytes, prompt, negative_prompt, operation, aspect_ratio, created_at)
    SELECT ${tenant}, 's1', 'tenants/' || ${tenant} || '/images/' || i || '.png', 'tenants/' || ${tenant} || '/thumbnails/' || i || '.webp',
      'image/png', 'png', 1, 1, 1000 + i, 1, 'p' || i || CASE WHEN i % 4 = 0 THEN ' owl' ELSE ' cat' END, NULL,
      CASE WHEN i % 10 = 0 THEN 'edit' ELSE 'generate' END, CASE WHEN i % 5 = 0 THEN '1:1' ELSE '16:9' END,
      timestamptz '2025-06-01' - make_interval(mins => i)
    FROM generate_series(1, ${n}) i`;
}

/** The gallery query as it was before issue 16 (an exact count and OFFSET paging over the same predicates). */
function oldQuery(tenant: string, f: ImageListFilters): { text: string; values: unknown[] } {
  const { filters: n, errors } = normalizeFilters(f);
  if (errors.length) throw new Error(errors.join());
  const v: unknown[] = [tenant];
  const p = (x: unknown) => {
    v.push(x);
    return `$${v.length}`;
  };
  const like = (s: string) => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const c = ['tenant_id = $1'];
  if (n.search) {
    if (n.searchMode === 'exact') c.push(`prompt ILIKE ${p(like(n.search))}`);
    else {
      const words = [...new Set(n.search.split(/\s+/).filter(Boolean))].slice(0, 20);
      c.push(`(${words.map((w) => `prompt ILIKE ${p(like(w))}`).join(n.searchMode === 'all' ? ' AND ' : ' OR ')})`);
    }
  }
  if (n.from) c.push(`created_at >= ${p(n.from)}`);
  if (n.to) c.push(`created_at < ${p(n.to)}`);
  if (n.aspectRatio) c.push(`aspect_ratio = ${p(n.aspectRatio)}`);
  if (n.operationType) c.push(`operation = ${p(n.operationType)}`);
  if (n.minSize !== undefined) c.push(`size_bytes >= ${p(n.minSize)}`);
  if (n.maxSize !== undefined) c.push(`size_bytes <= ${p(n.maxSize)}`);
  if (n.hasNegativePrompt === true) c.push(`negative_prompt IS NOT NULL AND negative_prompt <> ''`);
  if (n.hasNegativePrompt === false) c.push(`(negative_prompt IS NULL OR negative_prompt = '')`);
  const order = {
    newest: 'created_at DESC, id DESC',
    oldest: 'created_at ASC, id ASC',
    largest: 'size_bytes DESC, id DESC',
    smallest: 'size_bytes ASC, id ASC',
  }[n.sortBy];
  return { text: `SELECT id, count(*) OVER () AS total FROM images WHERE ${c.join(' AND ')} ORDER BY ${order}`, values: v };
}

const key = Buffer.alloc(32, 7);

/** Every page of a list, following nextCursor. */
async function walk(tenant: string, f: ImageListFilters, limit: number, between?: () => Promise<void>) {
  const ids: number[] = [];
  let cursor: string | undefined;
  let first: Awaited<ReturnType<typeof listImages>> | undefined;
  for (let pages = 0; pages < 10_000; pages++) {
    const r = await listImages(h.sql, tenant, f, { limit, cursor }, { cursorKey: key });
    first ??= r;
    ids.push(...r.rows.map((x) => x.id));
    if (!r.nextCursor) return { ids, first };
    expect(r.rows).toHaveLength(limit);
    cursor = r.nextCursor;
    await between?.();
  }
  throw new Error('cursor walk did not end');
}

beforeAll(async () => {
  h = await startLibrary();
});
afterAll(async () => {
  await h?.stop();
});

describe('keyset cursors', () => {
  it('walk every row once in order, stable under concurrent inserts, for each sort', async () => {
    const T = 'tCursor';
    // Ties on created_at and size_bytes: the id breaks them.
    const rows: Row[] = Array.from({ length: 53 }, (_, i) => ({
      prompt: `img ${i}`,
      negative: null,
      aspect: '1:1',
      size: 100 + (i % 9),
      at: new Date(Date.UTC(2025, 0, 1, 0, 0, Math.floor(i / 3))).toISOString(),
    }));
    await insert(h.sql, T, rows);
    for (const sortBy of ['newest', 'oldest', 'largest', 'smallest'] as const) {
      const expected = (await h.sql.unsafe(oldQuery(T, { sortBy }).text, oldQuery(T, { sortBy }).values as never[])).map((r) =>
        Number(r.id),
      );
      let n = 0;
      // Between pages others add images (newer than every row, and of sizes among the existing ones).
      const added: number[] = [];
      const { ids } = await walk(T, { sortBy }, 5, async () => {
        added.push(
          ...(await insert(h.sql, T, [
            { prompt: `late ${sortBy} ${n++}`, negative: null, aspect: '1:1', size: 104, at: new Date().toISOString() },
          ])),
        );
      });
      const original = ids.filter((id) => !added.includes(id));
      expect(original).toEqual(expected);
      expect(new Set(ids).size).toBe(ids.length);
      await h.sql`DELETE FROM images WHERE id = ANY(${added})`;
    }
  });

  it('keeps the microseconds of the position: rows apart by less than a millisecond are each walked once', async () => {
    // Two stores of one generate land within a millisecond; a position sent as a timestamptz parameter would go
    // through a JS Date (postgres.js) and lose its microseconds, so the next page skipped or repeated such rows.
    const T = 'tCursorMicro';
    const ids: number[] = [];
    for (const us of ['100', '450', '451', '900']) {
      const [r] = await h.sql`
        INSERT INTO images (tenant_id, session_id, object_key, thumbnail_key, mime_type, format, width, height, size_bytes,
          thumbnail_size_bytes, prompt, operation, created_at)
        VALUES (${T}, 's1', ${`k${us}`}, ${`t${us}`}, 'image/png', 'png', 1, 1, 10, 1, 'p', 'generate',
          ${`2025-03-01T10:00:00.707${us}Z`}::text::timestamptz)
        RETURNING id`;
      ids.push(Number(r.id));
    }
    for (const sortBy of ['newest', 'oldest'] as const) {
      const { ids: walked } = await walk(T, { sortBy }, 1);
      expect(walked).toEqual(sortBy === 'oldest' ? ids : [...ids].reverse());
    }
  });

  it('continues in one page read whatever the depth, through the gRPC service too', async () => {
    const T = 'tCursorGrpc';
    await bulk(h.sql, T, 300);
    const principal = h.principal(T);
    const base = { limit: 100, offset: 0, resolutionTiers: [], asJson: false };
    const p1 = await h.client.listImages(base, principal);
    expect(p1).toMatchObject({ total: 300, totalIsExact: true, limit: 100 });
    expect(p1.nextCursor).not.toBe('');
    const p2 = await h.client.listImages({ ...base, cursor: p1.nextCursor }, principal);
    const byOffset = await h.client.listImages({ ...base, offset: 100 }, principal);
    expect(p2.images.map((i) => i.id)).toEqual(byOffset.images.map((i) => i.id));
    const p3 = await h.client.listImages({ ...base, cursor: p2.nextCursor, asJson: true }, principal);
    expect(JSON.parse(Buffer.from(p3.pageJson).toString()).length).toBe(100);
    expect(p3.nextCursor).toBeUndefined(); // the last page
  });

  it('refuses a changed, foreign or mismatched cursor with 400 and the details', async () => {
    const T = 'tCursorBad';
    await bulk(h.sql, T, 30);
    const r = await listImages(h.sql, T, {}, { limit: 10 }, { cursorKey: key });
    const good = r.nextCursor as string;
    const [body, sig] = good.split('.');
    const flip = (s: string) => (s[0] === 'A' ? `B${s.slice(1)}` : `A${s.slice(1)}`);
    const forged = `${Buffer.from(JSON.stringify([1, 'newest', '2030-01-01T00:00:00.000000Z', 1])).toString('base64url')}.${sig}`;
    const bad = [`${flip(body)}.${sig}`, `${body}.${flip(sig)}`, forged, 'garbage', `${good}.x`, ''.padEnd(300, 'a')];
    for (const cursor of bad) {
      const err = await listImages(h.sql, T, {}, { limit: 10, cursor }, { cursorKey: key }).catch((e) => e);
      expect(err).toBeInstanceOf(AppError);
      expect(err).toMatchObject({ status: 400, body: { error: 'Invalid request payload', details: ['cursor is invalid'] } });
    }
    // Another tenant's cursor (same key), another sort's, another key's.
    await expect(listImages(h.sql, 'tOther', {}, { cursor: good }, { cursorKey: key })).rejects.toMatchObject({ status: 400 });
    await expect(listImages(h.sql, T, { sortBy: 'oldest' }, { cursor: good }, { cursorKey: key })).rejects.toMatchObject({ status: 400 });
    await expect(listImages(h.sql, T, {}, { cursor: good }, { cursorKey: Buffer.alloc(32, 8) })).rejects.toMatchObject({ status: 400 });
    await expect(listImages(h.sql, T, {}, { cursor: good, offset: 5 }, { cursorKey: key })).rejects.toMatchObject({
      status: 400,
      body: { details: ['cursor and offset cannot be combined'] },
    });
    // A well-formed cursor signed for this tenant is accepted (the check is the MAC, not the shape).
    const own = encodeCursor(key, T, { sort: 'newest', value: '2030-01-01T00:00:00.000000Z', id: 1 });
    expect((await listImages(h.sql, T, {}, { limit: 5, cursor: own }, { cursorKey: key })).rows).toHaveLength(5);
    // Through the service: the 400 crosses gRPC intact.
    const viaGrpc = await h.client
      .listImages({ limit: 5, offset: 0, resolutionTiers: [], asJson: true, cursor: `${body}.${flip(sig)}` }, h.principal(T))
      .catch((e) => e);
    expect(viaGrpc).toMatchObject({ status: 400, body: { error: 'Invalid request payload', details: ['cursor is invalid'] } });
  });
});

describe('bounded totals', () => {
  it('a single filter counts up to the cap; a search or combination counts within the window', async () => {
    const T = 'tTotals';
    await bulk(h.sql, T, TOTAL_WINDOW + 1000);
    await h.sql`ANALYZE images`;
    // Unfiltered: exact from the counter row.
    expect(await listImages(h.sql, T, {}, { limit: 5 })).toMatchObject({ total: TOTAL_WINDOW + 1000, totalIsExact: true });
    // One filter over the cap: a lower bound of at least the cap.
    const ar = await listImages(h.sql, T, { aspectRatio: '16:9' }, { limit: 5 });
    expect(ar).toMatchObject({ total: TOTAL_CAP, totalIsExact: false });
    // ... and below it, exact.
    const narrow = await listImages(h.sql, T, { maxSize: 1000 + 700 }, { limit: 5 });
    expect(narrow).toMatchObject({ total: 700, totalIsExact: true });
    // Deep offset: the bound covers what the client has seen.
    const deep = await listImages(h.sql, T, { aspectRatio: '16:9' }, { limit: 5, offset: 2000 });
    expect(deep).toMatchObject({ total: 2006, totalIsExact: false });
    // A search in a tenant larger than the window: the matches among the newest TOTAL_WINDOW (every fourth).
    const owl = await listImages(h.sql, T, { search: 'owl' }, { limit: 5 });
    expect(owl).toMatchObject({ total: TOTAL_WINDOW / 4, totalIsExact: false });
    // A date range the window covers entirely: exact again (the window walks the range).
    const day = await listImages(h.sql, T, { search: 'owl', dateFrom: '2025-05-31T12:00:00Z' }, { limit: 5 });
    expect(day).toMatchObject({ total: 180, totalIsExact: true });
    // Sorted by size, the window is still walked in date order within the range: the same counts. (Walked by size,
    // the 2,000 largest held none of the range's images: total 0, inexact.)
    for (const sortBy of ['largest', 'smallest'] as const) {
      const sized = await listImages(h.sql, T, { search: 'owl', dateFrom: '2025-05-31T12:00:00Z', sortBy }, { limit: 5 });
      expect(sized).toMatchObject({ total: 180, totalIsExact: true });
      expect(await listImages(h.sql, T, { search: 'owl', sortBy }, { limit: 5 })).toMatchObject({
        total: TOTAL_WINDOW / 4,
        totalIsExact: false,
      });
    }
    // Two filters: window.
    const two = await listImages(h.sql, T, { aspectRatio: '1:1', operationType: 'edit' }, { limit: 5 });
    expect(two).toMatchObject({ total: TOTAL_WINDOW / 10, totalIsExact: false });
  });

  it('a tenant within the window gets exact totals past the cap', async () => {
    const T = 'tTotalsSmall';
    await bulk(h.sql, T, 1500);
    expect(await listImages(h.sql, T, { search: 'cat' }, { limit: 5 })).toMatchObject({ total: 1125, totalIsExact: true });
    expect(await listImages(h.sql, T, { search: 'cat', searchMode: 'any', minSize: 0 }, { limit: 5 })).toMatchObject({
      total: 1125,
      totalIsExact: true,
    });
  });
});

describe('the match is ILIKE', () => {
  it('every search mode, in every case, each way a search is answered: the rows the old ILIKE query returns', async () => {
    const T = 'tCaseFold';
    const prompts = [
      'A red FOX',
      'the fox den',
      'Café at noon',
      'CAFÉ SOCIETY',
      'ẞIG wave',
      'ßig wave',
      'ǅx and ǆx',
      'İzmir',
      'izmir',
      'Ωmega ωMEGA',
      '100% a_b x\\y',
      'seashell SEA',
    ];
    await insert(
      h.sql,
      T,
      prompts.map((prompt, i) => ({
        prompt,
        negative: null,
        aspect: '1:1',
        size: 1 + i,
        at: new Date(Date.UTC(2025, 0, 1 + i)).toISOString(),
      })),
    );
    const terms = [
      'fox',
      'FOX',
      'Café',
      'café',
      'ẞig',
      'ßIG',
      'ǅx',
      'ǆX',
      'İz',
      'iZ',
      'ΩMEGA',
      '100%',
      'A_B',
      'X\\Y',
      'sea',
      'fox den',
      'FOX DEN',
    ];
    const searches = [...terms, 'fox café', 'ẞig İz', 'sea ωmega'];
    let compared = 0;
    for (const search of searches) {
      for (const searchMode of ['exact', 'all', 'any'] as const) {
        const old = oldQuery(T, { search, searchMode });
        const expected = (await h.sql.unsafe(old.text, old.values as never[])).map((r) => Number(r.id));
        for (const [how, filters, searchPlan] of [
          ['walk', { search, searchMode }, 'walk'],
          ['trigram', { search, searchMode }, 'trigram'],
          ['narrow', { search, searchMode, sessionId: 's1' }, undefined],
        ] as const) {
          const got = await listImages(h.sql, T, filters, { limit: 100 }, { searchPlan });
          expect(
            got.rows.map((r) => r.id),
            `${how} ${searchMode} '${search}'`,
          ).toEqual(expected);
          compared++;
        }
      }
    }
    // Not vacuous: case-insensitive matches exist (e.g. 'FOX' finds 'the fox den').
    const old = oldQuery(T, { search: 'FOX', searchMode: 'exact' });
    expect((await h.sql.unsafe(old.text, old.values as never[])).length).toBe(2);
    expect(compared).toBe(searches.length * 9);
  });
});

describe('same results as the unbounded queries (property)', () => {
  // Also words inside longer words and multibyte letters in either case: the trigram way's keys (migration 190)
  // must never drop a row the ILIKE keeps.
  // Letters whose case folding is not one-to-one (ẞ, the title-case ǅ, İ) too: the search lowers each prompt once
  // (lower(prompt) LIKE), the old query used ILIKE.
  const words = ['fox', 'Fox', 'red', 'snow', 'blue', '100%', 'a_b', 'x\\y', 'sea', 'seashell', 'café', 'CAFÉ', 'Ωmega', 'ẞig', 'ǅx', 'İz'];
  const rowArb = fc.record({
    prompt: fc.array(fc.constantFrom(...words), { minLength: 1, maxLength: 4 }).map((w) => w.join(' ')),
    negative: fc.constantFrom(null, '', 'blurry'),
    aspect: fc.constantFrom('1:1', '16:9', '4:3'),
    size: fc.integer({ min: 1, max: 50 }),
    at: fc.integer({ min: 0, max: 40 }).map((d) => new Date(Date.UTC(2025, 0, 1 + Math.floor(d / 2), d % 2 ? 12 : 0)).toISOString()),
  });
  const filterArb = fc.record(
    {
      search: fc.array(fc.constantFrom(...words, 'zzz', 'FOX'), { minLength: 1, maxLength: 3 }).map((w) => w.join(' ')),
      searchMode: fc.constantFrom('exact', 'all', 'any') as fc.Arbitrary<'exact' | 'all' | 'any'>,
      aspectRatio: fc.constantFrom('1:1', '16:9'),
      minSize: fc.integer({ min: 1, max: 24 }),
      maxSize: fc.integer({ min: 25, max: 60 }),
      dateFrom: fc.constantFrom('2025-01-03', '2025-01-10'),
      hasNegativePrompt: fc.boolean(),
      sortBy: fc.constantFrom('newest', 'oldest', 'largest', 'smallest') as fc.Arbitrary<'newest'>,
    },
    { requiredKeys: [] },
  );

  it('every search mode and filter: the same rows in the same order, the same total', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(rowArb, { minLength: 0, maxLength: 40 }),
        filterArb,
        fc.integer({ min: 1, max: 7 }),
        async (rows, f, limit) => {
          const T = `tProp${run++}`;
          await insert(h.sql, T, rows);
          const old = oldQuery(T, f);
          const expected = await h.sql.unsafe(old.text, old.values as never[]);
          const { ids, first } = await walk(T, f, limit);
          expect(ids).toEqual(expected.map((r) => Number(r.id)));
          // Small tenants: totals are exact and equal to the old count.
          expect(first?.totalIsExact).toBe(true);
          expect(first?.total).toBe(expected.length);
          // Offset paging: the old LIMIT/OFFSET page, whichever way a search is answered (walk or trigram index).
          const offset = Math.floor(expected.length / 2);
          for (const searchPlan of [undefined, 'walk', 'trigram'] as const) {
            const page = await listImages(h.sql, T, f, { limit, offset }, { searchPlan });
            expect(page.rows.map((r) => r.id)).toEqual(expected.slice(offset, offset + limit).map((r) => Number(r.id)));
            expect(page.total).toBe(expected.length);
          }
          // The trigram way through a cursor too: the old rows after the first page.
          if (f.search && first?.nextCursor) {
            const next = await listImages(h.sql, T, f, { limit, cursor: first.nextCursor }, { cursorKey: key, searchPlan: 'trigram' });
            expect(next.rows.map((r) => r.id)).toEqual(expected.slice(limit, 2 * limit).map((r) => Number(r.id)));
          }
        },
      ),
      { seed: 16, numRuns: 60 },
    );
  });

  // The property's searches rarely match more rows than a page (with seed 16, never): the trigram way through a
  // cursor, asserted on a tenant whose search matches three pages.
  it('a search answered by the trigram index through a cursor: the old rows after the first page', async () => {
    const T = 'tPropCursor';
    const rows: Row[] = Array.from({ length: 15 }, (_, i) => ({
      prompt: i % 4 === 3 ? 'blue sea' : `red fox ${i}`,
      negative: null,
      aspect: '1:1',
      size: 10 + i,
      at: new Date(Date.UTC(2025, 0, 1 + i)).toISOString(),
    }));
    await insert(h.sql, T, rows);
    const f: ImageListFilters = { search: 'fox', searchMode: 'all' };
    const limit = 4;
    const old = oldQuery(T, f);
    const expected = await h.sql.unsafe(old.text, old.values as never[]);
    expect(expected.length).toBeGreaterThan(2 * limit);
    const { first } = await walk(T, f, limit);
    expect(first?.nextCursor).toBeTruthy();
    const next = await listImages(h.sql, T, f, { limit, cursor: first?.nextCursor as string }, { cursorKey: key, searchPlan: 'trigram' });
    expect(next.rows.map((r) => r.id)).toEqual(expected.slice(limit, 2 * limit).map((r) => Number(r.id)));
  });
});

describe('abandoned work stops', () => {
  /** The library's list statements running now (application imagegen-library, active). */
  const running = () =>
    h.sql`SELECT pid, state, wait_event_type FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = 'imagegen-library' AND state = 'active' AND (query LIKE 'WITH tot AS%' OR query LIKE 'SELECT total, walked%')`;

  /** `sql` recording the statements made with its unsafe() (a page's): postgres.js sets `state` once one is sent. */
  function recording(sql: Sql): { sql: Sql; made: { state?: unknown }[] } {
    const made: { state?: unknown }[] = [];
    const spy = new Proxy(sql, {
      get(target, key, receiver) {
        if (key !== 'unsafe') return Reflect.get(target, key, receiver);
        return (...args: Parameters<Sql['unsafe']>) => {
          const q = target.unsafe(...args);
          made.push(q as { state?: unknown });
          return q;
        };
      },
    });
    return { sql: spy, made };
  }

  for (const how of ['cancelled by the caller', 'past its deadline'] as const) {
    it(`a call ${how} cancels its SQL (pg_stat_activity)`, async () => {
      const T = 'tCancel';
      await bulk(h.sql, T, 10);
      // Hold the table so the list statement waits: it runs until something cancels it.
      const blocker = await h.sql.reserve();
      try {
        await blocker`BEGIN`;
        await blocker`LOCK TABLE images IN ACCESS EXCLUSIVE MODE`;
        const gone = new AbortController();
        const call = h.client
          .listImages(
            { limit: 5, offset: 0, resolutionTiers: [], asJson: true, search: 'cat' },
            h.principal(T),
            how === 'past its deadline' ? { timeoutMs: 700 } : { signal: gone.signal },
          )
          .catch((e) => e);
        await waitFor(async () => (await running()).length === 1, { timeout: 5000, message: 'the list statement running' });
        if (how === 'cancelled by the caller') gone.abort();
        await waitFor(async () => (await running()).length === 0, { timeout: 3000, message: 'the list statement gone' });
        expect(await call).toBeInstanceOf(AppError);
      } finally {
        await blocker`ROLLBACK`;
        blocker.release();
      }
    });
  }

  // The unfiltered page (the gallery's hot path, a few ms whatever the tenant's size) runs pipelined on the pool
  // instead of on a reserved connection (issue 36 item 7) and is never cancelled: no CancelRequest can land on another
  // statement of its connection, and no cancel of a query not yet sent can leave a connection out of the pool.
  for (const when of ['waits for a busy connection', 'waits for its connection to open'] as const) {
    it(`an unfiltered page whose caller leaves while it ${when} runs to its end; the pool keeps its connection`, async () => {
      const T = 'tCheapQueued';
      await bulk(h.sql, T, 10);
      const one = createDb(h.ctx.config.databaseUrl as string, { schema: 'library', max: 1 });
      try {
        const held = when === 'waits for a busy connection' ? await one.reserve() : undefined;
        const gone = new AbortController();
        const spy = recording(one);
        const call = listImagesJson(spy.sql, T, {}, { limit: 5 }, 'http://files.test/', {
          signal: gone.signal,
          deadline: new Date(Date.now() + 60_000),
        });
        await waitFor(() => spy.made.length === 1, { interval: 1, message: 'the page made' });
        // Behind the held connection it cannot have been sent; a connection opens in a few round trips, so the page
        // is most likely its first query, unsent, when its caller leaves (a first version of the change, which took
        // such a query back, failed both cases).
        if (held) expect(spy.made[0].state).toBeFalsy();
        gone.abort();
        held?.release();
        const page = await call;
        expect(JSON.parse(page.json as string)).toHaveLength(5);
        const next = one`SELECT 1 AS x`.then((r) => r[0].x);
        expect(await Promise.race([next, new Promise((r) => setTimeout(() => r('pool stuck'), 3000))])).toBe(1);
      } finally {
        await one.end();
      }
    });
  }

  it('an unfiltered page already sent runs to its end when its caller leaves: the statement before it is not cancelled', async () => {
    const T = 'tCheapSent';
    await bulk(h.sql, T, 10);
    const one = createDb(h.ctx.config.databaseUrl as string, { schema: 'library', max: 1 });
    try {
      await one`SELECT 1`;
      // The page is pipelined behind a running statement on the pool's one connection.
      const sleeping = one`SELECT pg_sleep(0.3)`.then(
        () => 'finished',
        (e: { code?: string }) => e.code,
      );
      const gone = new AbortController();
      const spy = recording(one);
      const call = listImagesJson(spy.sql, T, {}, { limit: 5 }, 'http://files.test/', { signal: gone.signal });
      await waitFor(() => spy.made.some((q) => q.state), { message: 'the page sent behind the running statement' });
      gone.abort();
      expect(await sleeping).toBe('finished');
      const page = await call;
      expect(JSON.parse(page.json as string)).toHaveLength(5);
      expect(page.total).toBe(10);
    } finally {
      await one.end();
    }
  });
});
