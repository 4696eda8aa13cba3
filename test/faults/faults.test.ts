import { createDb, type Sql } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Journey, type PrivateNats, type ServiceName, sleep, startJourney, startPrivateNats } from '../distributed/harness.js';
import { type PrivatePostgres, startPrivatePostgres } from '../support/private-postgres.js';
import { waitFor } from '../support/wait.js';
import { type Answer, assertConsistent, assertNoUnexpectedDeath, errorsOf, FAULT_TIMERS, load, successAfter } from './support.js';

/**
 * Fault injection (issue 13, item 8): the distributed shape, every service its own process, on a private
 * PostgreSQL and a private nats-server (never the machine's shared ones). Each fault runs under a
 * generation load of its own tenant and then checks what a paying tenant cares about:
 * - usage equals exactly what the 200 answers reported (0 lost, 0 doubled), in images and bytes;
 * - the gallery lists exactly the images of the 200 answers (nothing of a failed request stays);
 * - no object in storage without a row (orphans are swept), no execution left running;
 * - no process died that the test did not kill.
 * Each prints its figures: client-visible errors (count, statuses, longest), recovery time.
 * The PostgreSQL outage has its own file (db-outage.test.ts); the ZIP race is in test/e2e.
 */

let pg: PrivatePostgres;
let nats: PrivateNats;
let j: Journey;
let db: Sql;
const killedByTest = new Set<ServiceName>();
const figures: Record<string, unknown>[] = [];

beforeAll(async () => {
  [pg, nats] = await Promise.all([startPrivatePostgres(), startPrivateNats()]);
  j = await startJourney({
    databaseUrl: pg.url,
    natsUrl: nats.url,
    env: { ...FAULT_TIMERS, RATE_LIMIT_DISABLED: '1', LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn' },
  });
  db = createDb(j.env.DATABASE_URL, { schema: 'public', max: 2 });
}, 180_000);

afterAll(async () => {
  console.log(`fault figures:\n${figures.map((f) => JSON.stringify(f)).join('\n')}`);
  await db?.end();
  await j?.stop();
  await Promise.all([pg?.close(), nats?.close()]);
}, 90_000);

/** The journey's sandbox provider has received a request whose prompt contains `text` (it is in flight there). */
async function atSandbox(text: string, n = 1): Promise<boolean> {
  const r = await fetch(`${j.sandboxUrl}/_sandbox/requests?contains=${encodeURIComponent(text)}`);
  return ((await r.json()) as { requests: unknown[] }).requests.length >= n;
}

async function restart(name: ServiceName) {
  await j.start(name);
  killedByTest.delete(name);
}

describe('faults under generation load', () => {
  it('generation killed mid-request: the clients get 503, nothing of theirs is listed or billed, executions end failed', async () => {
    const t = await j.createTenant();
    const l = load(j, t, () => ({ prompt: 'slow sea [[delay:700]]', n: 2 }));
    await successAfter(l.answers, 0);
    // One more request under an Idempotency-Key, in flight when the process dies.
    const keyed = { key: t.liveKey, body: { prompt: 'keyed sea [[delay:1500]]', n: 1 }, headers: { 'idempotency-key': 'killed-once' } };
    const firstTry = j.api('/api/images', keyed);
    await waitFor(() => atSandbox('keyed sea'), { message: 'the keyed request at the provider', timeout: 30_000, interval: 50 });
    killedByTest.add('generation');
    const killedAt = Date.now();
    await j.kill('generation', 'SIGKILL');
    await restart('generation'); // down until the new process is ready: the load goes on meanwhile
    const recovered = await successAfter(l.answers, Date.now());
    const answers = await l.stop();
    const during = answers.filter((a) => a.status !== 200);
    expect(during.length).toBeGreaterThan(0);
    for (const a of during) expect([503, 504]).toContain(a.status);
    // The keyed request failed with its process; its retry runs (not a replay), once, and is billed once.
    expect((await firstTry).status).toBe(503);
    const retry = await j.api('/api/images', keyed);
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    const replay = await j.api('/api/images', keyed);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    const images = retry.body.data.images.map((i: { record_id: number; size_bytes: number }) => ({ id: i.record_id, bytes: i.size_bytes }));
    answers.push({ start: 0, end: 0, status: 200, images });
    const result = await assertConsistent(j, db, t, answers);
    // Those executions were failed by the reaper (not left running), and they say why.
    const [{ n }] = await db`SELECT count(*)::int AS n FROM generation.executions
      WHERE tenant_id = ${t.tenantId} AND status = 'failed' AND error = 'Execution abandoned: the worker stopped'`;
    expect(n).toBeGreaterThan(0);
    figures.push({ fault: 'generation SIGKILL', ...errorsOf(answers), recoveryMs: recovered - killedAt, ...result });
    assertNoUnexpectedDeath(j, killedByTest);
  }, 120_000);

  it('generation killed with async jobs queued and running: each job completes once or ends failed, none lost or run twice', async () => {
    const t = await j.createTenant();
    const mark = `jobkill${Date.now()}`;
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      const r = await j.api('/api/images', {
        key: t.liveKey,
        body: { prompt: `${mark} job${i}. [[delay:800]]` },
        headers: { prefer: 'respond-async' },
      });
      expect(r.status, JSON.stringify(r.body)).toBe(202);
      ids.push(r.body.data.executionId);
    }
    // Jobs running at the provider (the rest queued) when the process dies.
    await waitFor(() => atSandbox(mark, 2), { message: 'jobs running at the provider', timeout: 30_000, interval: 50 });
    killedByTest.add('generation');
    await j.kill('generation', 'SIGKILL');
    await restart('generation');
    const executions = await waitFor(
      async () => {
        const all = await Promise.all(ids.map((id) => j.api(`/api/executions/${id}`, { key: t.liveKey })));
        const list = all.map((r) => r.body.execution);
        return list.every((e) => e.status === 'completed' || e.status === 'failed') && list;
      },
      { message: 'every job ended', timeout: 60_000 },
    );
    const completed = executions.filter((e: { status: string }) => e.status === 'completed');
    const failed = executions.filter((e: { status: string }) => e.status === 'failed');
    // The jobs that died with their process failed visibly; the queued ones ran on the new process.
    expect(failed.length).toBeGreaterThan(0);
    for (const e of failed) expect(e.error).toBe('Execution abandoned: the worker stopped');
    expect(completed.length).toBeGreaterThan(0);
    for (const e of completed) expect(e.result.data.images).toHaveLength(1);
    // None ran twice: each job's prompt reached the provider at most once.
    const seen = (await (await fetch(`${j.sandboxUrl}/_sandbox/requests?contains=${mark}`)).json()).requests as { prompt: string }[];
    const perJob = new Map<string, number>();
    for (const r of seen) {
      const job = /job\d+\./.exec(r.prompt)?.[0] as string;
      perJob.set(job, (perJob.get(job) ?? 0) + 1);
    }
    expect([...perJob.values()].filter((n) => n > 1)).toEqual([]);
    expect(perJob.size).toBeLessThanOrEqual(ids.length);
    // Listed and billed: exactly the completed jobs' images.
    const month = await waitFor(
      async () => {
        const u = await j.api('/api/usage', { key: t.liveKey });
        return u.body.data.months[0]?.total_images === completed.length && u.body.data.months[0];
      },
      { message: `usage to count the ${completed.length} completed jobs`, timeout: 30_000 },
    );
    expect(month.total_operations).toBe(completed.length);
    expect((await j.api('/api/images?limit=100', { key: t.liveKey })).body.pagination.total).toBe(completed.length);
    figures.push({ fault: 'generation killed with async jobs', jobs: ids.length, completed: completed.length, failed: failed.length });
  }, 120_000);

  it('library killed mid-store: no file without a row survives, nothing is billed that was not answered 200', async () => {
    const t = await j.createTenant();
    const l = load(j, t, () => ({ prompt: 'library crash', n: 3 }));
    await successAfter(l.answers, 0);
    killedByTest.add('library');
    const killedAt = Date.now();
    await j.kill('library', 'SIGKILL');
    await restart('library'); // down until the new process is ready: the load goes on meanwhile
    const recovered = await successAfter(l.answers, Date.now());
    const answers = await l.stop();
    const result = await assertConsistent(j, db, t, answers);
    figures.push({ fault: 'library SIGKILL', ...errorsOf(answers), recoveryMs: recovered - killedAt, ...result });
    assertNoUnexpectedDeath(j, killedByTest);
  }, 120_000);

  it('usage-metering killed under load: generation keeps serving known tenants, usage catches up exactly', async () => {
    const t = await j.createTenant();
    const l = load(j, t, () => ({ prompt: 'metering away', n: 1 }));
    await successAfter(l.answers, 0);
    killedByTest.add('usage-metering');
    const killedAt = Date.now();
    await j.kill('usage-metering', 'SIGKILL');
    // Down until the load got answers to 6 requests sent while it was (the fail-open quota check served them).
    const during = () => l.answers.filter((a) => a.start >= killedAt + 500);
    await waitFor(() => during().length >= 6, { message: '6 answers to requests sent during the outage', timeout: 60_000, interval: 50 });
    const outage = during();
    await restart('usage-metering');
    const answers = await l.stop();
    // The quota check fails open for a tenant checked within QUOTA_FALLBACK_MS: no refusal during the outage.
    expect(outage.length).toBeGreaterThan(3);
    expect(errorsOf(outage).errors).toBe(0);
    const result = await assertConsistent(j, db, t, answers);
    figures.push({ fault: 'usage-metering SIGKILL', ...errorsOf(answers), outageRequests: outage.length, ...result });
    assertNoUnexpectedDeath(j, killedByTest);
  }, 120_000);

  for (const emptyStore of [false, true]) {
    it(`NATS killed 5 s and restarted${emptyStore ? ' with an empty store' : ''}: 0 events lost, 0 doubled`, async () => {
      const t = await j.createTenant();
      const l = load(j, t, () => ({ prompt: 'bus away', n: 1 }));
      await successAfter(l.answers, 0);
      const downAt = Date.now();
      await nats.restart(5000, { emptyStore });
      const recovered = await successAfter(l.answers, Date.now());
      await sleep(1000);
      const answers = await l.stop();
      const result = await assertConsistent(j, db, t, answers);
      figures.push({
        fault: `NATS restart${emptyStore ? ' (empty store)' : ''}`,
        ...errorsOf(answers),
        recoveryMs: recovered - downAt,
        ...result,
      });
      assertNoUnexpectedDeath(j, killedByTest);
    }, 120_000);
  }

  it('gateway SIGTERM with requests in flight: readiness turns 503 at once, in-flight requests complete', async () => {
    const t = await j.createTenant();
    let answered = 0;
    const inFlight = Array.from({ length: 3 }, (_, i) =>
      j.api('/api/images', { key: t.liveKey, body: { prompt: `in flight ${i} [[delay:1500]]`, n: 1 } }).finally(() => answered++),
    );
    await waitFor(() => atSandbox(`in flight`, 3), { message: 'the 3 requests at the provider', timeout: 30_000, interval: 50 });
    killedByTest.add('gateway');
    const stopping = j.kill('gateway', 'SIGTERM');
    // Readiness turns (503, or the listener closed) while the requests are still in flight.
    const { ready, whileInFlight } = await waitFor(
      async () => {
        const status = await fetch(`${j.baseUrl}/readyz`).then(
          (r) => r.status,
          () => 0,
        );
        return status === 200 ? undefined : { ready: status, whileInFlight: 3 - answered };
      },
      { message: 'readiness to turn', timeout: 10_000, interval: 20 },
    );
    expect(whileInFlight).toBe(3);
    const done = await Promise.all(inFlight);
    const exit = await stopping;
    expect([503, 0]).toContain(ready);
    expect(done.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(exit.code).toBe(0);
    await restart('gateway');
    const answers: Answer[] = done.map((r) => ({
      start: 0,
      end: 0,
      status: r.status,
      images: r.body.data.images.map((i: any) => ({ id: i.record_id, bytes: i.size_bytes })),
    }));
    const result = await assertConsistent(j, db, t, answers);
    figures.push({ fault: 'gateway SIGTERM', inFlight: 3, completed: done.length, readyzWhileStopping: ready, ...result });
    assertNoUnexpectedDeath(j, killedByTest);
  }, 120_000);
});
