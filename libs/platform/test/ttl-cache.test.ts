import { expect, test } from 'vitest';
import { TtlCache } from '../src/ttl-cache.js';

test('holds at most maxEntries keys, dropping the oldest', async () => {
  const cache = new TtlCache<number, number>(60_000, 3);
  let loads = 0;
  const load = async (k: number) => {
    loads++;
    return k * 10;
  };
  for (const k of [1, 2, 3, 4]) expect(await cache.get(k, load)).toBe(k * 10);
  expect(loads).toBe(4);
  await cache.get(4, load);
  await cache.get(2, load);
  expect(loads).toBe(4);
  await cache.get(1, load); // dropped when 4 came in
  expect(loads).toBe(5);
  cache.invalidate(4);
  await cache.get(4, load);
  expect(loads).toBe(6);
});
