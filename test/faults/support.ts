import { randomUUID } from 'node:crypto';
import type { Sql } from '@imagegen/platform';
import { expect } from 'vitest';
import { ALL_SERVICES, type Journey, type ServiceName, sleep } from '../distributed/harness.js';
import type { TestTenant } from '../support/api.js';
import { waitFor } from '../support/wait.js';

/**
 * What every fault test checks, shared by the fault suites (faults.test.ts, db-outage.test.ts) and the
 * replica suite: a generation load of one tenant, and the invariants a paying tenant cares about.
 */

export interface Answer {
  start: number;
  end: number;
  status: number;
  images: { id: number; bytes: number }[];
  retryAfter?: string | null;
  error?: string;
  /** With LoadOptions.keyed: the request's Idempotency-Key and the body it sent. */
  idempotencyKey?: string;
  body?: string;
}

/** Short reaper timers so a fault test sees in seconds what production does within a minute. */
export const FAULT_TIMERS = {
  EXECUTION_HEARTBEAT_MS: '1000',
  EXECUTION_DEAD_AFTER_MS: '5000',
  EXECUTION_REAPER_MS: '1000',
  OBJECT_GC_GRACE_MS: '5000',
  OBJECT_GC_SWEEP_MS: '1000',
};

/** Sends one generation request (the default: to the journey's gateway). */
export type Send = (path: string, init: RequestInit) => Promise<Response>;

export interface LoadOptions {
  /** Concurrent clients (default 3). */
  clients?: number;
  /** How each request is sent (default: to the journey's gateway); lets a test spread them over several gateways. */
  send?: Send;
  /**
   * While this answers true, a client that has waited 1 s for an answer sends its next request anyway (the one in
   * flight goes on): requests keep arriving during an outage while earlier ones wait for its end.
   */
  overlap?: () => boolean;
  /** Each request under an Idempotency-Key of its own, kept on its answer with the body sent (to replay it). */
  keyed?: boolean;
  /** The client's own timeout per request (default 60 s). */
  timeoutMs?: number;
}

/**
 * Generation clients: loops of POST /api/images for `tenant` until stop() is called. Each answer is kept with the
 * images a 200 reported; a failed one is followed by a short back-off, as a client honouring Retry-After would
 * (tests need less than its seconds). stop() waits for every request in flight.
 */
export function load(j: Journey, tenant: TestTenant, body: () => Record<string, unknown>, opts: LoadOptions = {}) {
  const post: Send = opts.send ?? ((path, init) => fetch(`${j.baseUrl}${path}`, init));
  const answers: Answer[] = [];
  const inFlight = new Set<Promise<void>>();
  let running = true;
  const request = async () => {
    const start = Date.now();
    const sent = JSON.stringify(body());
    const idempotencyKey = opts.keyed ? `load-${randomUUID()}` : undefined;
    const keyed = idempotencyKey ? { idempotencyKey, body: sent } : {};
    try {
      const res = await post('/api/images', {
        method: 'POST',
        headers: {
          'x-api-key': tenant.liveKey,
          'content-type': 'application/json',
          ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
        },
        body: sent,
        signal: AbortSignal.timeout(opts.timeoutMs ?? 60_000),
      });
      const json = (await res.json().catch(() => undefined)) as any;
      const images = res.status === 200 ? json.data.images.map((i: any) => ({ id: i.record_id, bytes: i.size_bytes })) : [];
      answers.push({
        ...keyed,
        start,
        end: Date.now(),
        status: res.status,
        images,
        retryAfter: res.headers.get('retry-after'),
        ...(res.status === 200 ? {} : { error: JSON.stringify(json) }),
      });
      if (res.status !== 200) await sleep(100);
    } catch (err) {
      answers.push({ ...keyed, start, end: Date.now(), status: 0, images: [], error: (err as Error).message });
      await sleep(100);
    }
  };
  const loop = async () => {
    while (running) {
      const r = request().finally(() => inFlight.delete(r));
      inFlight.add(r);
      if (!opts.overlap) {
        await r;
        continue;
      }
      for (;;) {
        const answered = await Promise.race([r.then(() => true), sleep(1000).then(() => false)]);
        if (answered || opts.overlap() || !running) break;
      }
    }
  };
  const loops = Array.from({ length: opts.clients ?? 3 }, loop);
  return {
    answers,
    /** When the first 200 of a request started at or after `since` came (undefined: none yet). */
    okSince: (since: number) => answers.find((a) => a.start >= since && a.status === 200)?.end,
    async stop() {
      running = false;
      await Promise.all(loops);
      await Promise.all([...inFlight]);
      return answers;
    },
  };
}

/** Waits until `n` answers with status 200 started after `since`; answers the first one's end. */
export async function successAfter(answers: Answer[], since: number, timeoutMs = 60_000): Promise<number> {
  return waitFor(async () => answers.find((a) => a.start >= since && a.status === 200)?.end, {
    message: 'a successful request',
    timeout: timeoutMs,
    interval: 50,
  });
}

export function errorsOf(answers: Answer[]) {
  const failed = answers.filter((a) => a.status !== 200);
  const statuses: Record<string, number> = {};
  for (const a of failed) statuses[a.status] = (statuses[a.status] ?? 0) + 1;
  return {
    requests: answers.length,
    errors: failed.length,
    statuses,
    longestErrorMs: failed.reduce((m, a) => Math.max(m, a.end - a.start), 0),
  };
}

export async function usageOf(j: Journey, tenant: TestTenant): Promise<{ images: number; bytes: number }> {
  const r = await j.api('/api/usage', { key: tenant.liveKey });
  const m = r.body?.data?.months?.[0];
  return { images: m?.total_images ?? 0, bytes: m?.total_bytes ?? 0 };
}

/**
 * The invariants every fault must keep, waited for (the reapers and consumers need a few seconds):
 * usage and gallery equal the 200 answers, nothing pending or running, every object owned by a row.
 */
export async function assertConsistent(j: Journey, db: Sql, tenant: TestTenant, answers: Answer[]) {
  const ok = answers.flatMap((a) => a.images);
  const expected = { images: ok.length, bytes: ok.reduce((s, i) => s + i.bytes, 0) };
  const okIds = new Set(ok.map((i) => i.id));
  let usage = { images: -1, bytes: -1 };
  let listed: number[] = [];
  let running = -1;
  let pending = -1;
  let orphans: string[] = [];
  try {
    await waitFor(
      async () => {
        usage = await usageOf(j, tenant);
        const rows = await db`SELECT id FROM library.images WHERE tenant_id = ${tenant.tenantId}`;
        listed = rows.map((r) => Number(r.id));
        [{ n: running }] =
          await db`SELECT count(*)::int AS n FROM generation.executions WHERE tenant_id = ${tenant.tenantId} AND status = 'running'`;
        [{ n: pending }] = await db`SELECT count(*)::int AS n FROM library.pending_images WHERE tenant_id = ${tenant.tenantId}`;
        const owned = await db`SELECT object_key AS k FROM library.images WHERE tenant_id = ${tenant.tenantId}
          UNION ALL SELECT thumbnail_key FROM library.images WHERE tenant_id = ${tenant.tenantId}`;
        const ownedKeys = new Set(owned.map((r) => r.k as string));
        orphans = j.objectKeys().filter((k) => k.startsWith(`tenants/${tenant.tenantId}/`) && !ownedKeys.has(k));
        return (
          usage.images === expected.images &&
          usage.bytes === expected.bytes &&
          listed.length === okIds.size &&
          listed.every((id) => okIds.has(id)) &&
          running === 0 &&
          pending === 0 &&
          orphans.length === 0
        );
      },
      { message: 'usage, gallery, executions and storage to settle', timeout: 45_000, interval: 500 },
    );
  } catch {
    // Fall through to the precise assertions below (they name what is off).
  }
  const extra = listed.filter((id) => !okIds.has(id));
  const why = extra.length
    ? await db`SELECT i.id, i.execution_id, e.status, e.error, e.result_summary,
        (SELECT string_agg(l.level || ' ' || l.message, ' | ' ORDER BY l.id) FROM generation.execution_logs l WHERE l.execution_id = e.execution_id) AS logs
      FROM library.images i LEFT JOIN generation.executions e ON e.execution_id = i.execution_id
      WHERE i.tenant_id = ${tenant.tenantId} AND i.id = ANY(${extra}::bigint[])`
    : [];
  expect({ usage, running, pending, orphans, listedWithoutA200: why }).toEqual({
    usage: expected,
    running: 0,
    pending: 0,
    orphans: [],
    listedWithoutA200: [],
  });
  expect(listed.sort((a, b) => a - b)).toEqual([...okIds].sort((a, b) => a - b));
  return { lost: 0, doubled: 0, images: expected.images, orphans: orphans.length, executionsRunning: running };
}

export function assertNoUnexpectedDeath(j: Journey, killedByTest: Set<ServiceName>) {
  for (const name of ALL_SERVICES) {
    if (killedByTest.has(name)) continue;
    const sp = j.services.get(name);
    expect(sp?.proc?.exitCode ?? null, `${name} exited`).toBeNull();
    expect(sp?.proc?.signalCode ?? null, `${name} was killed`).toBeNull();
  }
}
