import { expect, test, vi } from 'vitest';
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

test('update replaces an answer from the current one (kept, expired or loading) with a fresh lifetime; a cache that keeps nothing ignores it', async () => {
  const cache = new TtlCache<string, number>(60_000);
  let loads = 0;
  const load = async () => {
    loads++;
    return 5;
  };
  // Nothing kept yet: next sees undefined.
  cache.update('a', async (current) => (current ? (await current) + 1 : 1));
  expect(await cache.get('a', load)).toBe(1);
  // Kept: next sees it.
  cache.update('a', async (current) => (current ? (await current) + 1 : 1));
  expect(await cache.get('a', load)).toBe(2);
  // Still loading: next chains on the load, and a get after the update sees the update's answer.
  let release: (v: number) => void = () => {};
  const loading = cache.get('b', () => new Promise<number>((r) => (release = r)));
  cache.update('b', async (current) => Math.max(await (current as Promise<number>), 7));
  release(3);
  expect(await loading).toBe(3);
  expect(await cache.get('b', load)).toBe(7);
  expect(loads).toBe(0);
  // Expired: passed on as it is, and the result gets a fresh lifetime.
  vi.useFakeTimers({ toFake: ['Date'] }); // the cache's clock: its 30 ms pass exactly, without waiting for them
  try {
    const short = new TtlCache<string, number>(30);
    await short.get('c', async () => 10);
    vi.advanceTimersByTime(30);
    short.update('c', async (current) => (await (current as Promise<number>)) + 1);
    expect(await short.get('c', load)).toBe(11);
    expect(loads).toBe(0);
  } finally {
    vi.useRealTimers();
  }
  // ttlMs <= 0 keeps nothing, updates included.
  const none = new TtlCache<string, number>(0);
  none.update('d', async () => 99);
  expect(await none.get('d', load)).toBe(5);
});
