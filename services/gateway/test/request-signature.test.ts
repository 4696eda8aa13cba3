import { expect, it } from 'vitest';
import { memoryReplayStore, redisReplayStore, signedPrefix } from '../src/request-signature.js';

/** The pieces of request-signature.ts the end-to-end file (test/e2e/signed-requests.test.ts) cannot reach. */

it('the memory replay store claims an id once until its TTL ends, and drops the oldest beyond its size', async () => {
  let t = 1000;
  const store = memoryReplayStore(() => t, 2);
  expect(await store.claim('a', 100)).toBe(true);
  expect(await store.claim('a', 100)).toBe(false);
  t = 1100;
  expect(await store.claim('a', 100)).toBe(true);
  expect(await store.claim('b', 100)).toBe(true);
  // Full: the expired are swept first, then the oldest goes.
  expect(await store.claim('c', 100)).toBe(true);
  expect(await store.claim('c', 100)).toBe(false);
  expect(await store.claim('b', 100)).toBe(false);
  expect(await store.claim('a', 100)).toBe(true);
  await store.close();
});

it('the Redis replay store is one SET NX with the TTL in ms under its prefix', async () => {
  const calls: unknown[][] = [];
  const taken = new Set<string>();
  const store = redisReplayStore(
    {
      async set(key, value, px, ms, nx) {
        calls.push([key, value, px, ms, nx]);
        if (taken.has(key)) return null;
        taken.add(key);
        return 'OK';
      },
    },
    'pfx:sig:',
  );
  expect(await store.claim('key_1:ab', 1500.5)).toBe(true);
  expect(await store.claim('key_1:ab', 1500)).toBe(false);
  expect(calls[0]).toEqual(['pfx:sig:key_1:ab', '1', 'PX', 1501, 'NX']);
});

it('the signed string starts with the timestamp, the method and the path with its query, one per line', () => {
  expect(signedPrefix('1700000000000', 'POST', '/api/images?x=1')).toBe('1700000000000\nPOST\n/api/images?x=1\n');
});
