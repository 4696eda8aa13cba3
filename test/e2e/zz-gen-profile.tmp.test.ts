import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestStack, type TestStack } from '../support/stack.js';
process.env.RATE_LIMIT_DISABLED = '1';
let s: TestStack;
beforeAll(async () => { s = await startTestStack(); });
afterAll(async () => { await s?.stop(); });
it('profile', async () => {
  const t = await s.createTenant();
  for (let i = 0; i < 5; i++) await s.api('/api/images', { key: t.liveKey, body: { prompt: 'warm' } });
  const totals: Record<string, number[]> = {};
  for (let i = 0; i < 15; i++) {
    const t0 = performance.now();
    const r = await s.api('/api/images', { key: t.liveKey, body: { prompt: 'warm' } });
    const total = performance.now() - t0;
    const e = await s.api(`/api/executions/${r.body.data.executionId}`, { key: t.liveKey });
    const logs = e.body.execution.logEntries;
    let prev = Date.parse(e.body.execution.startedAt);
    const row: string[] = [`total ${total.toFixed(0)}`];
    for (const l of logs) { const ts = Date.parse(l.timestamp); const k = l.message.slice(0, 20); (totals[k] ??= []).push(ts - prev); row.push(`${k}:${ts - prev}`); prev = ts; }
    (totals.total ??= []).push(total);
    console.log(row.join(' | '));
  }
  for (const [k, v] of Object.entries(totals)) { v.sort((a,b)=>a-b); console.log(k, 'median', v[Math.floor(v.length/2)]); }
  expect(1).toBe(1);
});
