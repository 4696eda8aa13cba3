import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import {
  createEventTransport,
  createLogger,
  createTestDatabase,
  type EventMessage,
  type EventTransport,
  freePort as osFreePort,
  type SubscribeOptions,
} from '@imagegen/platform';
import { waitFor } from './wait.js';

/** The repository root (the working directory of the service processes). */
const ROOT = new URL('../..', import.meta.url).pathname;

/**
 * A free port below Linux's ephemeral range (32768+), so that it cannot be taken by an outgoing connection
 * or a port-0 listener of a parallel test between now and the moment a child process binds it (the OS's
 * choice of the moment, platform's freePort, can be: test files run side by side). Never the same port twice
 * in one test process.
 *
 * Each vitest worker draws from its own slice of 20000-31999 (VITEST_POOL_ID): a port handed out here may be
 * bound long after (the rolling upgrade's surge slots, a minute later), and a test file in the other worker
 * could otherwise take it in between. Its process then answered the /readyz the harness polled, while the
 * child it started exited with status 2 (address in use).
 */
export async function freePort(): Promise<number> {
  const [from, width] = portSlice(process.env.VITEST_POOL_ID);
  for (let i = 0; i < 200; i++) {
    const port = from + Math.floor(Math.random() * width);
    if (reserved.has(port)) continue;
    const ok = await new Promise<boolean>((res) => {
      const srv = createServer();
      srv.once('error', () => res(false));
      srv.listen(port, '127.0.0.1', () => srv.close(() => res(true)));
    });
    if (ok) {
      reserved.add(port);
      return port;
    }
  }
  return osFreePort();
}
const reserved = new Set<number>();

/** [first port, count] of a worker's slice: four slices of 3000 (maxWorkers is 2); the whole range outside vitest. */
export function portSlice(poolId: string | undefined): [number, number] {
  const id = Number(poolId);
  if (!Number.isInteger(id) || id < 1) return [20_000, 12_000];
  return [20_000 + ((id - 1) % 4) * 3000, 3000];
}

/** Polls `url` until it answers 2xx (e.g. a process's /readyz or the gateway's /health). */
export async function waitForUrl(url: string, timeoutMs = 90_000): Promise<void> {
  await waitFor(async () => (await fetch(url)).ok, { timeout: timeoutMs, interval: 250, message: `${url} to answer 2xx` });
}

export interface ServiceProcesses {
  db: { url: string; drop: () => Promise<void> };
  /** NATS_URL of the machine (nats://127.0.0.1:4222 by default). */
  natsUrl: string;
  /** The test's own connection to the event bus (subscribed as asked). */
  events: EventTransport;
  /**
   * Starts one service by its standalone entry (`node --import tsx services/<name>/src/main.ts`) in the
   * repository root, with PATH, LOG_LEVEL (TEST_LOG_LEVEL, default fatal) and `env`.
   */
  run(entry: string, env: Record<string, string>): ChildProcess;
  /** SIGTERM to the processes, last started first (SIGKILL after 15 s), then closes events and drops the database. */
  stop(): Promise<void>;
}

/**
 * Start-up of the e2e tests of the distributed shape (test/e2e/*-distributed.test.ts): a fresh database of
 * the machine's PostgreSQL (named after `name`), a subscription on the machine's NATS JetStream under the
 * test's own EVENTS_PREFIX (durable `<name>-test`), and the service processes the test runs.
 */
export async function startServiceProcesses(opts: {
  name: string;
  eventsPrefix: string;
  subjects: SubscribeOptions['subjects'];
  handler: (m: EventMessage) => Promise<void>;
}): Promise<ServiceProcesses> {
  const procs: ChildProcess[] = [];
  const db = await createTestDatabase(undefined, opts.name);
  const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  const events = await createEventTransport(
    { natsUrl, eventsPrefix: opts.eventsPrefix },
    createLogger(`${opts.name}-test`, 'silent'),
  ).catch(async (err) => {
    await db.drop();
    throw err;
  });
  try {
    await events.subscribe({ durable: `${opts.name}-test`, subjects: opts.subjects, handler: opts.handler });
  } catch (err) {
    await events.close();
    await db.drop();
    throw err;
  }
  return {
    db,
    natsUrl,
    events,
    run(entry, env) {
      const child = spawn(process.execPath, ['--import', 'tsx', entry], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'fatal', ...env },
        stdio: ['ignore', 'inherit', 'inherit'],
      });
      procs.push(child);
      return child;
    },
    async stop() {
      for (const p of procs.reverse()) {
        if (p.exitCode !== null) continue;
        const exited = new Promise((r) => p.once('exit', r));
        p.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
        if (p.exitCode === null) p.kill('SIGKILL');
      }
      await events.close();
      await db.drop();
    },
  };
}
