/**
 * The provider circuit breaker through the whole stack: closed -> open after the failure threshold
 * (upstream 5xx), open answers 503 fast without calling the upstream, half_open after the reset
 * timeout, closed again after a successful trial. Small thresholds come from the environment.
 */
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';
import { lastSandboxId, receivedSince, sandboxMode } from './generation-support.js';

let s: TestStack;
let t: TestTenant;

beforeAll(async () => {
  s = await startTestStack({ env: { PROVIDER_BREAKER_THRESHOLD: '3', PROVIDER_BREAKER_RESET_MS: '800', RATE_LIMIT_DISABLED: '1' } });
  t = await s.createTenant();
});
afterAll(async () => {
  await s?.stop();
});
beforeEach(async () => {
  await fetch(`${s.sandboxUrl}/_sandbox/mode`, { method: 'DELETE' });
});

const gen = (prompt: string, model = 'provA-flash-lite-image') =>
  s.api('/api/images', { key: t.liveKey, body: { prompt, model_id: model } });

/** Sends `prompt` until the open circuit lets it through (its reset timeout over): the trial's answer. */
const trial = (prompt: string) =>
  waitFor(
    async () => {
      const r = await gen(prompt);
      return r.status !== 503 && r;
    },
    { message: 'the circuit to let a trial through', interval: 100 },
  );

it('opens after 3 consecutive upstream failures, fails fast while open, recovers after the reset timeout', async () => {
  await sandboxMode(s, { provider: 'provA', failNext: 10, status: 500 });
  const since = await lastSandboxId(s);
  for (let i = 1; i <= 3; i++) {
    const r = await gen(`breaker fail ${i}`);
    expect(r.status).toBe(502);
    expect(r.body.error).toBe('Image generation failed: provider provA is not available');
  }
  expect(await receivedSince(s, since)).toHaveLength(3);

  const fast = await gen('while open');
  expect(fast.status).toBe(503);
  expect(fast.body.error).toMatch(/^Provider provA is temporarily unavailable \(circuit breaker open\); retry in \d+ s$/);
  expect(Number(fast.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  expect(await receivedSince(s, since)).toHaveLength(3); // not sent upstream

  // provB has its own breaker
  expect((await gen('provB unaffected', 'provB-image-2')).status).toBe(200);

  // the upstream recovers; after the reset timeout one trial goes through and closes the circuit
  await sandboxMode(s, { provider: 'provA', reset: true });
  const first = await trial('trial after reset');
  expect(first.status, JSON.stringify(first.body)).toBe(200);
  const after = await gen('closed again');
  expect(after.status).toBe(200);
});

it('a failed trial reopens the circuit', async () => {
  await sandboxMode(s, { provider: 'provA', failNext: 10, status: 503 });
  for (let i = 0; i < 3; i++) expect((await gen(`reopen ${i}`)).status).toBe(502);
  expect((await gen('open')).status).toBe(503);
  expect((await trial('trial fails')).status).toBe(502); // half_open -> open
  expect((await gen('open again')).status).toBe(503);
  await sandboxMode(s, { provider: 'provA', reset: true });
  expect((await trial('recovered')).status).toBe(200);
});

it('key and safety refusals do not count as provider failures', async () => {
  for (let i = 0; i < 4; i++) expect((await gen(`unsafe ${i} [[safety]]`)).status).toBe(400);
  expect((await gen('still closed')).status).toBe(200);
});
