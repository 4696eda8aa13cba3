/**
 * The slot stores behind the per-tenant concurrency caps (src/tenant-concurrency.ts) against the machine's
 * Redis: shared counting, leases renewed while held, a crashed gateway's slots expiring, the in-memory
 * fallback while Redis is unreachable, and the loud start-up warning about an unreachable Redis.
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { memorySlotStore, redisSlotStore, watchRedis } from '@imagegen/operations';
import { createLogger, freePort } from '@imagegen/platform';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/wait.js';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const clients: Redis[] = [];
const client = (url = REDIS_URL) => {
  const r = new Redis(url, { maxRetriesPerRequest: 1, connectTimeout: 1000, commandTimeout: 1000 });
  r.on('error', () => {});
  clients.push(r);
  return r;
};
const ready = (r: Redis) => new Promise<void>((res) => (r.status === 'ready' ? res() : r.once('ready', () => res())));
/** Redis' clock (the slots' leases are scores on it), in ms. */
const redisNow = async (r: Redis) => {
  const [sec, micro] = await r.time();
  return Number(sec) * 1000 + Math.floor(Number(micro) / 1000);
};
/** When the last lease among the slots of `key` runs out (0: none left), by Redis' clock. */
const leasesEnd = async (r: Redis, key: string) => {
  const last = await r.zrange(key, -1, -1, 'WITHSCORES');
  return last.length ? Number(last[1]) : 0;
};
/** Waits until Redis' clock is past `end`. */
const redisPast = (r: Redis, end: number, message: string) => waitFor(async () => (await redisNow(r)) > end, { message });

afterAll(() => {
  for (const c of clients) c.disconnect();
});

describe('slot stores', () => {
  it('memory: at most max per key, released once, keys independent', async () => {
    const m = memorySlotStore();
    const a = await m.acquire('gen:t1', 2);
    const b = await m.acquire('gen:t1', 2);
    expect(a && b).toBeTruthy();
    expect(await m.acquire('gen:t1', 2)).toBeUndefined();
    expect(await m.acquire('gen:t2', 2)).toBeTruthy();
    a?.release();
    a?.release(); // twice: one slot back, not two
    expect(await m.acquire('gen:t1', 2)).toBeTruthy();
    expect(await m.acquire('gen:t1', 2)).toBeUndefined();
  });

  it('redis: two gateways share the count; a held slot is renewed past its lease; closing gives back', async () => {
    const prefix = `conctest${randomBytes(4).toString('hex')}:`;
    const [ra, rb] = [client(), client()];
    await Promise.all([ready(ra), ready(rb)]);
    const noFallback = () => {
      throw new Error('unexpected fallback');
    };
    const a = redisSlotStore(ra, prefix, memorySlotStore(), noFallback, 600);
    const b = redisSlotStore(rb, prefix, memorySlotStore(), noFallback, 600);
    const held = [await a.acquire('stream:t', 2), await b.acquire('stream:t', 2)];
    expect(held.every(Boolean)).toBe(true);
    const firstLeasesEnd = await leasesEnd(ra, `${prefix}stream:t`);
    expect(await a.acquire('stream:t', 2)).toBeUndefined();
    expect(await b.acquire('stream:t', 2)).toBeUndefined();
    // Held longer than the lease: renewals keep both counted.
    await redisPast(ra, firstLeasesEnd, 'the first leases to have run out');
    expect(await b.acquire('stream:t', 2)).toBeUndefined();
    // Gateway b gives its slot back: one free, for either.
    held[1]?.release();
    await waitFor(async () => (await ra.zcard(`${prefix}stream:t`)) === 1, { message: "b's slot removed" });
    const again = await a.acquire('stream:t', 2);
    expect(again).toBeTruthy();
    expect(await b.acquire('stream:t', 2)).toBeUndefined();
    // Closing a gateway gives back what it holds.
    await a.close();
    expect(await b.acquire('stream:t', 2)).toBeTruthy();
    expect(await b.acquire('stream:t', 2)).toBeTruthy();
    await b.close();
  });

  it('redis: a gateway that dies without releasing frees its slots within the lease', async () => {
    const prefix = `conctest${randomBytes(4).toString('hex')}:`;
    const [ra, rb] = [client(), client()];
    await Promise.all([ready(ra), ready(rb)]);
    const a = redisSlotStore(ra, prefix, memorySlotStore(), () => {}, 600);
    const b = redisSlotStore(rb, prefix, memorySlotStore(), () => {}, 600);
    expect(await a.acquire('gen:t', 2)).toBeTruthy();
    expect(await a.acquire('gen:t', 2)).toBeTruthy();
    expect(await b.acquire('gen:t', 2)).toBeUndefined();
    ra.disconnect(); // the process is gone: its renewals stop, nothing is released
    // Every lease in Redis has run out (by Redis' clock; read again each time, in case a last renewal landed).
    await waitFor(async () => (await redisNow(rb)) > (await leasesEnd(rb, `${prefix}gen:t`)), { message: "a's leases to have run out" });
    expect(await b.acquire('gen:t', 2)).toBeTruthy();
    expect(await b.acquire('gen:t', 2)).toBeTruthy();
    expect(await b.acquire('gen:t', 2)).toBeUndefined();
    await b.close();
  });

  it('redis unreachable: counted in memory meanwhile, and said', async () => {
    const dead = client(`redis://127.0.0.1:${await freePort()}`);
    let told = 0;
    const s = redisSlotStore(dead, 'x:', memorySlotStore(), () => told++, 600);
    const one = await s.acquire('gen:t', 1);
    expect(one).toBeTruthy();
    expect(await s.acquire('gen:t', 1)).toBeUndefined();
    one?.release();
    expect(await s.acquire('gen:t', 1)).toBeTruthy();
    expect(told).toBeGreaterThan(0);
    await s.close();
  });
});

describe('watchRedis', () => {
  const capture = () => {
    const lines: any[] = [];
    const dest = new Writable({
      write(chunk, _enc, cb) {
        for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        cb();
      },
    });
    return { lines, logger: createLogger('gw-test', 'info', dest) };
  };

  it('warns at start, naming REDIS_URL and the consequence, when Redis cannot be reached', async () => {
    const { lines, logger } = capture();
    const url = `redis://user:secret@127.0.0.1:${await freePort()}`;
    const dead = client(url);
    await watchRedis(dead, logger, url, 'rate limits are NOT enforced until it is back');
    const warn = lines.find((l) => l.level === 40);
    expect(warn?.msg).toMatch(
      /^Redis at redis:\/\/user:\*\*\*@127\.0\.0\.1:\d+ \(REDIS_URL\) is unreachable \(.+\): rate limits are NOT enforced until it is back$/,
    );
    expect(JSON.stringify(lines)).not.toContain('secret');
  });

  it('says nothing when Redis answers', async () => {
    const { lines, logger } = capture();
    await watchRedis(client(), logger, REDIS_URL, 'x');
    expect(lines).toEqual([]);
  });
});
