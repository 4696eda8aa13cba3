import type { Principal } from '@imagegen/platform';
import { expect, onTestFinished, test, vi } from 'vitest';
import { type Collaborators, withTenantCache } from '../src/deps.js';

const p = { tenantId: 't1', requestId: 'r', source: 'test' } as unknown as Principal;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Fake collaborators that count their calls; getTenant fails while `failing` is set. */
function counting() {
  const calls = { getTenant: 0, getProviderKeys: 0, checkQuota: 0 };
  const state = { failing: false, keys: ['k1'] };
  const c = {
    getTenant: async (_p: Principal, tenantId: string) => {
      calls.getTenant++;
      await sleep(5);
      if (state.failing) throw new Error('tenancy unavailable');
      return { tenantId, isActive: true, modelId: 'm', allowedModels: ['m'] };
    },
    getProviderKeys: async () => {
      calls.getProviderKeys++;
      return [...state.keys];
    },
    checkQuota: async () => {
      calls.checkQuota++;
      return { allowed: true };
    },
  } as unknown as Collaborators;
  return { c, calls, state };
}

test('the tenant and its provider keys are read once per TTL (concurrent reads share the call); quota checks every time', async () => {
  vi.useFakeTimers({ toFake: ['Date'] }); // the cache's clock: its TTL passes exactly, without waiting for it
  onTestFinished(() => {
    vi.useRealTimers();
  });
  const f = counting();
  const c = withTenantCache(f.c, 200);
  await Promise.all([c.getTenant(p, 't1'), c.getTenant(p, 't1'), c.getTenant(p, 't1')]);
  await c.getTenant(p, 't1');
  expect(f.calls.getTenant).toBe(1);
  await c.getTenant(p, 't2');
  expect(f.calls.getTenant).toBe(2);

  expect(await c.getProviderKeys(p, 't1', 'provA')).toEqual(['k1']);
  f.state.keys = ['k2'];
  expect(await c.getProviderKeys(p, 't1', 'provA')).toEqual(['k1']);
  expect(await c.getProviderKeys(p, 't1', 'provB')).toEqual(['k2']);
  expect(f.calls.getProviderKeys).toBe(2);

  await c.checkQuota(p, 't1', 1);
  await c.checkQuota(p, 't1', 1);
  expect(f.calls.checkQuota).toBe(2);

  // After the TTL, a rotated key and a changed tenant are read again.
  vi.advanceTimersByTime(200);
  expect(await c.getProviderKeys(p, 't1', 'provA')).toEqual(['k2']);
  await c.getTenant(p, 't1');
  expect(f.calls.getTenant).toBe(3);
});

test('a failed lookup is not kept: the next request asks again', async () => {
  const f = counting();
  const c = withTenantCache(f.c, 10_000);
  f.state.failing = true;
  await expect(c.getTenant(p, 't1')).rejects.toThrow('tenancy unavailable');
  f.state.failing = false;
  await expect(c.getTenant(p, 't1')).resolves.toMatchObject({ tenantId: 't1' });
  expect(f.calls.getTenant).toBe(2);
});

test('a TTL of 0 turns the cache off', async () => {
  const f = counting();
  const c = withTenantCache(f.c, 0);
  await c.getTenant(p, 't1');
  await c.getTenant(p, 't1');
  expect(f.calls.getTenant).toBe(2);
});

test('invalidate (TenantChanged) drops the tenant and its keys of every provider, and no other tenant', async () => {
  const f = counting();
  const c = withTenantCache(f.c, 60_000);
  await Promise.all([c.getTenant(p, 't1'), c.getTenant(p, 't2'), c.getProviderKeys(p, 't1', 'provA'), c.getProviderKeys(p, 't1', 'provB')]);
  c.invalidate('t1');
  await Promise.all([c.getTenant(p, 't1'), c.getTenant(p, 't2'), c.getProviderKeys(p, 't1', 'provA'), c.getProviderKeys(p, 't1', 'provB')]);
  expect(f.calls.getTenant).toBe(3);
  expect(f.calls.getProviderKeys).toBe(4);
});
