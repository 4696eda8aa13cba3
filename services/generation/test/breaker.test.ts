import { AppError } from '@imagegen/platform';
import { describe, expect, it } from 'vitest';
import { type BreakerState, CircuitBreaker } from '../src/providers/breaker.js';

function setup(threshold = 3, resetMs = 1000) {
  let now = 0;
  const changes: string[] = [];
  const b = new CircuitBreaker('provA', {
    failureThreshold: threshold,
    resetTimeoutMs: resetMs,
    now: () => now,
    onChange: (from: BreakerState, to: BreakerState) => changes.push(`${from}->${to}`),
  });
  return { b, changes, advance: (ms: number) => (now += ms) };
}

const refused = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return err as AppError;
  }
  throw new Error('expected the breaker to refuse');
};

describe('CircuitBreaker', () => {
  it('opens after N consecutive failures and refuses fast with 503 and Retry-After', () => {
    const { b, changes } = setup(3);
    b.acquire().failure();
    b.acquire().failure();
    b.acquire().success(); // resets the count
    b.acquire().failure();
    b.acquire().failure();
    expect(b.current).toBe('closed');
    b.acquire().failure();
    expect(b.current).toBe('open');
    expect(changes).toEqual(['closed->open']);
    const err = refused(() => b.acquire());
    expect(err).toBeInstanceOf(AppError);
    expect(err.status).toBe(503);
    expect(err.body.error).toMatch(/Provider provA is temporarily unavailable \(circuit breaker open\)/);
    expect(err.headers['Retry-After']).toBe('1');
  });

  it('goes half_open after the reset timeout and closes on a successful trial', () => {
    const { b, changes, advance } = setup(1, 1000);
    b.acquire().failure();
    advance(999);
    refused(() => b.acquire());
    advance(1);
    const trial = b.acquire();
    expect(b.current).toBe('half_open');
    // only one trial at a time
    expect(refused(() => b.acquire()).status).toBe(503);
    trial.success();
    expect(b.current).toBe('closed');
    expect(changes).toEqual(['closed->open', 'open->half_open', 'half_open->closed']);
    expect(b.status()).toMatchObject({
      provider: 'provA',
      state: 'closed',
      consecutiveFailures: 0,
      failureThreshold: 1,
      resetTimeoutMs: 1000,
    });
  });

  it('reopens when the trial fails', () => {
    const { b, changes, advance } = setup(2, 500);
    b.acquire().failure();
    b.acquire().failure();
    advance(500);
    b.acquire().failure();
    expect(b.current).toBe('open');
    expect(changes).toEqual(['closed->open', 'open->half_open', 'half_open->open']);
    expect(refused(() => b.acquire()).status).toBe(503);
  });

  it('a released ticket frees the trial slot without changing state', () => {
    const { b, advance } = setup(1, 100);
    b.acquire().failure();
    advance(100);
    b.acquire().release();
    expect(b.current).toBe('half_open');
    b.acquire().success();
    expect(b.current).toBe('closed');
  });
});
