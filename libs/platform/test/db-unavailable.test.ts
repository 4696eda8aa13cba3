import * as grpc from '@grpc/grpc-js';
import { expect, test } from 'vitest';
import { createDb, dbReadiness, reconnectBackoff } from '../src/db.js';
import { AppError, isUnavailableError, knownAppError, neverReachedServer } from '../src/errors.js';
import { fromServiceError, toServiceError } from '../src/grpc.js';
import { freePort } from '../src/net.js';

/** Issue 13, item 7: an unreachable database is 503 + Retry-After (gRPC UNAVAILABLE), fast, everywhere. */

const pgError = (code: string) => Object.assign(new Error(`postgres ${code}`), { code });

test('connection errors and shutdown SQLSTATEs become 503 with Retry-After; other errors stay unknown', () => {
  for (const code of [
    'ECONNREFUSED',
    'CONNECT_TIMEOUT',
    'CONNECTION_CLOSED',
    'CONNECTION_ENDED',
    'CONNECTION_DESTROYED',
    '57P01',
    '57P03',
    '08006',
  ]) {
    const app = knownAppError(pgError(code));
    expect(app?.status, code).toBe(503);
    expect(app?.body).toEqual({ error: 'Service temporarily unavailable' });
    expect(app?.headers['retry-after'], code).toMatch(/^\d+$/);
  }
  const refused = new AggregateError([pgError('ECONNREFUSED'), pgError('ECONNREFUSED')], 'connect failed');
  expect(isUnavailableError(refused)).toBe(true);
  for (const code of ['23505', '42P01', '57014', 'ERR_X']) expect(knownAppError(pgError(code)), code).toBeUndefined();
  expect(knownAppError(new TypeError('bug'))).toBeUndefined();
});

test('a statement is known never sent only when its connection was never made; a connection lost after it went out is in doubt', () => {
  for (const code of ['ECONNREFUSED', 'CONNECT_TIMEOUT', 'CONNECTION_ENDED', 'ENOTFOUND', '57P03', '53300']) {
    expect(neverReachedServer(pgError(code)), code).toBe(true);
  }
  for (const code of ['CONNECTION_CLOSED', 'CONNECTION_DESTROYED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', '57P01', '08006', '23505']) {
    expect(neverReachedServer(pgError(code)), code).toBe(false);
  }
  expect(neverReachedServer(new AggregateError([pgError('ECONNREFUSED'), pgError('ECONNREFUSED')]))).toBe(true);
  expect(neverReachedServer(new AggregateError([pgError('ECONNREFUSED'), pgError('ECONNRESET')]))).toBe(false);
  expect(neverReachedServer(new TypeError('bug'))).toBe(false);
});

test('a gRPC handler failing on an unreachable database answers UNAVAILABLE, and the caller gets 503 + Retry-After', () => {
  const se = toServiceError(pgError('ECONNREFUSED'), 'req-1');
  expect(se.code).toBe(grpc.status.UNAVAILABLE);
  const back = fromServiceError(se as grpc.ServiceError, 'req-1');
  expect(back).toBeInstanceOf(AppError);
  expect(back.status).toBe(503);
  expect(back.headers['retry-after']).toBe('2');
  // A bare UNAVAILABLE (the peer is down: no body in metadata) says when to retry too.
  const bare = fromServiceError(
    { code: grpc.status.UNAVAILABLE, details: 'No connection established', metadata: new grpc.Metadata() } as grpc.ServiceError,
    'r',
  );
  expect(bare.status).toBe(503);
  expect(bare.headers['retry-after']).toBe('2');
});

test('queries and readiness fail fast while nothing listens, and the pool does not back off for long', async () => {
  expect(Math.max(...Array.from({ length: 20 }, (_, i) => reconnectBackoff(i + 1)))).toBeLessThanOrEqual(0.5);
  const port = await freePort();
  const sql = createDb(`postgres://postgres@127.0.0.1:${port}/postgres`, { schema: 'x', max: 2 });
  try {
    const ready = dbReadiness(sql, { timeoutMs: 1000, cacheMs: 1000 });
    // Many failures in a row: postgres.js's default backoff would now wait 10-20 s before each connect.
    for (let i = 0; i < 10; i++) await sql`SELECT 1`.catch(() => {});
    const started = Date.now();
    const err = await sql`SELECT 1`.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isUnavailableError(err)).toBe(true);
    expect(Date.now() - started).toBeLessThan(1500);
    const t = Date.now();
    expect(await ready()).toBe(false);
    expect(Date.now() - t).toBeLessThan(1500);
  } finally {
    await sql.end({ timeout: 1 });
  }
});
