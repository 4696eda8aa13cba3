import { createDb, type Sql } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Journey, type PrivateNats, startJourney, startPrivateNats } from '../distributed/harness.js';
import { type PrivatePostgres, startPrivatePostgres } from '../support/private-postgres.js';
import { waitFor } from '../support/wait.js';
import { type Answer, assertConsistent, load as clients, FAULT_TIMERS, usageOf } from './support.js';

/**
 * Issue 35: every answer tells the truth about what was stored and billed, even when the process that ran the
 * generation, or the database, dies mid-request. Two scenarios of the issue, each in a loop of rounds (a fresh
 * tenant per round), in the distributed shape on a private PostgreSQL and NATS:
 * - generation SIGKILLed (twice a round) while 8 clients keep 8 generations in flight (`n: 4`, sandbox delays
 *   200-1,040 ms);
 * - PostgreSQL stopped (fast shutdown) for OUTAGE_MS under 4 clients generating.
 * Every round asserts: the images of the 200 answers are exactly the listed ones, which are exactly the billed
 * ones (so no 503 answer has billed images), and every failure is a 503 with Retry-After. Each round prints its
 * figures (`[truthful] ...`): answers by status, images answered / listed / billed, the longest answer.
 */

/** Rounds per scenario (each well under a minute); TRUTHFUL_ROUNDS=10 for a longer hunt. */
const ROUNDS = Number(process.env.TRUTHFUL_ROUNDS ?? 2);
const OUTAGE_MS = 10_000;

let pg: PrivatePostgres;
let nats: PrivateNats;
let j: Journey;
let db: Sql;

beforeAll(async () => {
  [pg, nats] = await Promise.all([startPrivatePostgres(), startPrivateNats()]);
  j = await startJourney({
    databaseUrl: pg.url,
    natsUrl: nats.url,
    env: {
      ...FAULT_TIMERS,
      RATE_LIMIT_DISABLED: '1',
      TENANT_MAX_GENERATIONS_IN_FLIGHT: '64',
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
    },
  });
  db = createDb(j.env.DATABASE_URL, { schema: 'public', max: 2 });
}, 180_000);

afterAll(async () => {
  if (pg && !pg.running) await pg.start().catch(() => {});
  await db?.end();
  await j?.stop();
  await Promise.all([pg?.close(), nats?.close()]);
}, 90_000);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let lostBefore = 0;

/** The round's figures, then its assertions (what the issue asks of every round). */
async function settle(scenario: string, round: number, tenant: Awaited<ReturnType<Journey['createTenant']>>, answers: Answer[]) {
  const byStatus: Record<string, number> = {};
  for (const a of answers) byStatus[a.status] = (byStatus[a.status] ?? 0) + 1;
  const answered = answers.flatMap((a) => a.images).length;
  let listed = 0;
  let billed = 0;
  // Wait for the consumers and reapers to settle (assertConsistent waits too, and names what is off).
  await waitFor(
    async () => {
      const [{ n }] = await db`SELECT count(*)::int AS n FROM library.images WHERE tenant_id = ${tenant.tenantId}`;
      listed = n;
      billed = (await usageOf(j, tenant)).images;
      return listed === answered && billed === answered;
    },
    { message: 'listed and billed to settle', timeout: 30_000, interval: 250 },
  ).catch(() => {});
  const longest = Math.max(0, ...answers.map((a) => a.end - a.start));
  // What the gateway did with each generation answer lost with its replica (its log says so): rebuilt from the
  // completed execution, or the 503 stood (with the execution's status).
  const lost = j
    .logs('gateway')
    .split('\n')
    .filter((l) => l.includes('generation answer lost'))
    .slice(lostBefore);
  lostBefore += lost.length;
  const lostAnswers: Record<string, number> = {};
  for (const l of lost) {
    const o = JSON.parse(l) as { msg: string; status?: string };
    const k = o.msg.includes('answered from its completed execution') ? 'recovered' : (o.status ?? o.msg);
    lostAnswers[k] = (lostAnswers[k] ?? 0) + 1;
  }
  const figures = {
    scenario,
    round,
    answers: byStatus,
    lostAnswers,
    imagesAnswered: answered,
    listed,
    billed,
    longestAnswerMs: longest,
  };
  console.log(`[truthful] ${JSON.stringify(figures)}`);
  const failed = answers.filter((a) => a.status !== 200);
  for (const a of failed) {
    expect(a.status, `${JSON.stringify(a)}\n${JSON.stringify(figures)}`).toBe(503);
    expect(a.retryAfter, JSON.stringify(a)).toMatch(/^\d+$/);
  }
  await assertConsistent(j, db, tenant, answers);
  return figures;
}

describe('every answer tells the truth about what was stored and billed', () => {
  it(`generation SIGKILLed twice under 8 generations of n: 4 in flight: answered = listed = billed (${ROUNDS} rounds)`, async () => {
    for (let round = 1; round <= ROUNDS; round++) {
      const t = await j.createTenant();
      // Every request under a key of its own: a 200 must replay as given (replays see the same outcome).
      const load = clients(j, t, () => ({ prompt: `sea [[delay:${200 + Math.floor(Math.random() * 841)}]]`, n: 4 }), {
        clients: 8,
        keyed: true,
        timeoutMs: 90_000,
      });
      await waitFor(async () => load.okSince(0), { message: 'a first success', timeout: 30_000, interval: 50 });
      for (let kill = 0; kill < 2; kill++) {
        // A random moment within a generation's span, so the kill lands anywhere in the requests' lives.
        await sleep(300 + Math.floor(Math.random() * 900));
        await j.kill('generation', 'SIGKILL');
        await sleep(500);
        await j.start('generation');
        const up = Date.now();
        await waitFor(async () => load.okSince(up), { message: 'a success after the restart', timeout: 60_000, interval: 50 });
      }
      const answers = await load.stop();
      await settle('generation SIGKILL x2', round, t, answers);
      // A replay of each 200 gives the same images (the recovered answers among them), marked as a replay.
      for (const a of answers.filter((x) => x.status === 200)) {
        const replay = await fetch(`${j.baseUrl}/api/images`, {
          method: 'POST',
          headers: { 'x-api-key': t.liveKey, 'content-type': 'application/json', 'idempotency-key': a.idempotencyKey as string },
          body: a.body,
        });
        const json = (await replay.json()) as { data: { images: { record_id: number }[] } };
        expect(replay.status).toBe(200);
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        expect(json.data.images.map((i) => i.record_id)).toEqual(a.images.map((i) => i.id));
      }
    }
  }, 600_000);

  it(`PostgreSQL stopped ${OUTAGE_MS / 1000} s under 4 generating clients: answered = listed = billed (${ROUNDS} rounds)`, async () => {
    for (let round = 1; round <= ROUNDS; round++) {
      const t = await j.createTenant();
      let outage = false;
      const load = clients(j, t, () => ({ prompt: `outage ${round}`, n: 1 }), { clients: 4, overlap: () => outage, timeoutMs: 90_000 });
      await waitFor(async () => load.okSince(0), { message: 'a first success', timeout: 30_000, interval: 50 });
      await sleep(2000 + Math.floor(Math.random() * 1000));
      const down = Date.now();
      await pg.stop();
      const stopped = Date.now();
      outage = true;
      await sleep(OUTAGE_MS - (Date.now() - down));
      // Answers that end once the restart has begun waited for the database (it accepts connections before start()
      // resolves).
      const restarting = Date.now();
      await pg.start();
      outage = false;
      const up = Date.now();
      await waitFor(async () => load.okSince(up), { message: 'a success after the restart', timeout: 30_000, interval: 50 });
      await sleep(1000);
      const answers = await load.stop();
      const inFlightAtStop = answers.filter((a) => a.start < down && a.end > down);
      const startedInOutage = answers.filter((a) => a.start >= stopped && a.start < restarting);
      console.log(
        `[truthful] round ${round}: the fast shutdown took ${stopped - down} ms; in flight at the stop (ms after the stop began) ` +
          `${JSON.stringify(inFlightAtStop.map((a) => ({ status: a.status, ms: a.end - down, waitedForTheDatabase: a.end >= restarting })))}; ` +
          `started while stopped ${startedInOutage.length}, longest ${Math.max(0, ...startedInOutage.map((a) => a.end - a.start))} ms`,
      );
      await settle('PostgreSQL stop', round, t, answers);
      // Item 3: a request in flight at the stop answers within seconds of it, unless it waited for the database (its
      // final write may have landed, or its images wait for their commit: see the README); about 2 s, with room for
      // a busy CI machine. Every request started while the database was stopped fails fast (at most 2.3 s measured).
      for (const a of inFlightAtStop.filter((x) => x.end < restarting)) expect(a.end - down, JSON.stringify(a)).toBeLessThanOrEqual(4000);
      for (const a of startedInOutage) expect(a.end - a.start, JSON.stringify(a)).toBeLessThanOrEqual(3000);
    }
  }, 600_000);
});
