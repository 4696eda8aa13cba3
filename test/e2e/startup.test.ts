/**
 * Start-up that explains itself (issue 15 item 8), tried as a new user would: the real entry points
 * (`node --import tsx services/stack/src/main.ts`, a standalone service's main) with a wrong setting or a missing
 * dependency end with ONE line on stderr naming the setting or the cause, exit status 2 and no stack trace.
 * The all-in-one listens on 127.0.0.1 unless HOST says otherwise, and says loudly that Redis is unreachable.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDb, createTestDatabase } from '@imagegen/platform';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/stack.js';
import { waitFor } from '../support/wait.js';

const repo = new URL('../../', import.meta.url).pathname;
const STACK = 'services/stack/src/main.ts';
const dirs: string[] = [];
const children: ChildProcess[] = [];
const openDir = (d: string) => {
  chmodSync(d, 0o755);
  return d;
};
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'imagegen-startup-'));
  dirs.push(d);
  return d;
};

afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs an entry point with only `env` (plus PATH and HOME) until it exits, or kills it after `timeoutMs`. */
function run(entry: string, env: Record<string, string>, timeoutMs = 60_000): Promise<Ran> {
  const started = Date.now();
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    cwd: repo,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'warn', ...env },
  });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d) => (stdout += d));
  child.stderr?.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) =>
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    }),
  );
}

/** Starts the stack and waits for its banner; the process keeps running. */
async function startRunning(env: Record<string, string>): Promise<{ child: ChildProcess; out: () => string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', STACK], {
    cwd: repo,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'warn', ...env },
  });
  children.push(child);
  let out = '';
  child.stdout?.on('data', (d) => (out += d));
  child.stderr?.on('data', (d) => (out += d));
  await waitFor(() => /Demo tenant/.test(out) || child.exitCode !== null, { timeout: 120_000, interval: 200, message: 'the banner' }).catch(
    (err) => {
      throw new Error(`no banner:\n${out}`, { cause: err });
    },
  );
  if (!/Demo tenant/.test(out)) throw new Error(`stack exited early:\n${out}`);
  return { child, out: () => out };
}

/** Node 20's known oidc-provider notice (README) is not part of the answer. */
const stderrLines = (r: Ran) => r.stderr.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('oidc-provider WARNING'));

/** Exit 2, exactly one line on stderr matching `line`, no stack trace anywhere. */
function expectOneLine(r: Ran, line: RegExp) {
  expect({ code: r.code, stderr: stderrLines(r) }, `stdout:\n${r.stdout}\nstderr:\n${r.stderr}`).toEqual({
    code: 2,
    stderr: [expect.stringMatching(line)],
  });
  expect(`${r.stdout}\n${r.stderr}`).not.toMatch(/^\s+at /m);
  expect(r.stderr).not.toMatch(/^undefined$/m);
}

const postmasterPid = (dataDir: string) => {
  try {
    return Number(readFileSync(join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return 0;
  }
};

/** Stops the embedded PostgreSQL still running on `dataDir`, if any (SIGTERM, then SIGKILL after 10 s). */
async function stopPostgres(dataDir: string) {
  const pid = postmasterPid(dataDir);
  if (!pid) return;
  // Only that PostgreSQL: a reused pid of another program is left alone.
  const alive = () => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dataDir);
    } catch {
      return false;
    }
  };
  if (!alive()) return;
  process.kill(pid, 'SIGTERM');
  await waitFor(() => !alive(), { timeout: 10_000, interval: 100 }).catch(() => {}); // else SIGKILL
  if (alive()) process.kill(pid, 'SIGKILL');
}

const listening = (port: number, host: string) =>
  new Promise<boolean>((resolve) => {
    const s = connect({ port, host });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });

describe('the all-in-one refuses a wrong setting with one line, exit 2', () => {
  it('invalid PORT, LOG_LEVEL or DATABASE_URL', async () => {
    const dataDir = tempDir();
    const [port, level, db] = await Promise.all([
      run(STACK, { DATA_DIR: dataDir, PORT: '80a' }),
      run(STACK, { DATA_DIR: dataDir, LOG_LEVEL: 'loud' }),
      run(STACK, { DATA_DIR: dataDir, DATABASE_URL: 'mysql://app:hunter2@db.example/app' }),
    ]);
    expectOneLine(port, /^imagegen: invalid configuration: PORT must be a port number from 0 to 65535 \(got "80a"\)$/);
    expectOneLine(
      level,
      /^imagegen: invalid configuration: LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent \(got "loud"\)$/,
    );
    expectOneLine(
      db,
      /^imagegen: invalid configuration: DATABASE_URL must be a PostgreSQL URL like postgres:\/\/user:password@host:5432\/database/,
    );
    expect(db.stderr).not.toContain('hunter2');
  });

  it('PostgreSQL unreachable: names DATABASE_URL and the cause, before starting anything', async () => {
    const closed = await freePort();
    const r = await run(STACK, { DATA_DIR: tempDir(), DATABASE_URL: `postgres://postgres:pw@127.0.0.1:${closed}/imagegen` });
    expectOneLine(r, new RegExp(`^imagegen: cannot use PostgreSQL at 127\\.0\\.0\\.1:${closed} \\(DATABASE_URL\\): connection refused`));
    expect(r.stderr).not.toContain(':pw@');
  });

  it('the gateway port taken: found before any module starts', async () => {
    const db = await createTestDatabase(undefined, 'startup');
    const port = await freePort();
    const blocker: Server = createServer();
    await new Promise<void>((r) => blocker.listen(port, '0.0.0.0', () => r()));
    try {
      const r = await run(STACK, { DATA_DIR: tempDir(), DATABASE_URL: db.url, PORT: String(port) });
      expectOneLine(
        r,
        new RegExp(
          `^imagegen: PORT ${port} is already in use on 127\\.0\\.0\\.1: stop the program using it or set another PORT \\(e\\.g\\. PORT=${port + 1}\\)$`,
        ),
      );
      // Nothing started: no module migrated its schema.
      const sql = createDb(db.url, { schema: 'public', max: 1 });
      const schemas =
        await sql`SELECT schema_name FROM information_schema.schemata WHERE schema_name IN ('tenancy', 'library', 'generation')`;
      await sql.end();
      expect(schemas).toEqual([]);
    } finally {
      blocker.close();
      await db.drop();
    }
  });
});

describe('the quick start on embedded PostgreSQL', () => {
  // Not created yet, as ./data on a fresh machine: the start creates it. (Its parent is opened to others as a
  // project folder is: as root, the embedded PostgreSQL runs as its own user, which must reach DATA_DIR.)
  const dataDir = join(openDir(tempDir()), 'data');
  let first: { child: ChildProcess; out: () => string } | undefined;
  let port = 0;
  // Whatever a failed test left: the stack (stopped gracefully, which stops its PostgreSQL), then an orphaned PostgreSQL.
  afterAll(async () => {
    const child = first?.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 20_000))]);
    }
    await stopPostgres(dataDir);
  }, 40_000);

  it('listens on 127.0.0.1 by default and says loudly that Redis is unreachable', async () => {
    port = await freePort();
    const redisPort = await freePort();
    first = await startRunning({ DATA_DIR: dataDir, PORT: String(port), REDIS_URL: `redis://127.0.0.1:${redisPort}` });
    const out = first.out();
    expect(out).toContain(`imagegen is running at http://localhost:${port}`);
    // Before the banner, a warning naming REDIS_URL and what it means.
    const warning = out.split('\n').find((l) => l.includes('(REDIS_URL) is unreachable') && l.includes('rate limits are NOT enforced'));
    expect(warning, out).toBeTruthy();
    expect(out.indexOf(warning as string)).toBeLessThan(out.indexOf('imagegen is running at'));
    expect(await listening(port, '127.0.0.1')).toBe(true);
    // Not on the machine's other addresses (HOST=0.0.0.0 would opt in): an external one, else another loopback one.
    const other =
      Object.values(networkInterfaces())
        .flat()
        .find((a) => a && a.family === 'IPv4' && !a.internal)?.address ?? '127.0.0.2';
    expect(await listening(port, other)).toBe(false);
  }, 150_000);

  it('a second instance on the same data folder: one line naming DATA_DIR and the running pid', async () => {
    const pid = first?.child.pid as number;
    const r = await run(STACK, { DATA_DIR: dataDir, PORT: String(await freePort()) });
    expectOneLine(
      r,
      new RegExp(`^imagegen: DATA_DIR .+ is in use by another running imagegen \\(pid ${pid}\\): stop it first, or set another DATA_DIR$`),
    );
  }, 60_000);

  it('after a crash that left its PostgreSQL running: one line naming that PostgreSQL', async () => {
    const child = first?.child as ChildProcess;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL'); // the stack dies; its embedded PostgreSQL (another process) keeps the folder
    await exited;
    const pgPid = postmasterPid(dataDir);
    try {
      const r = await run(STACK, { DATA_DIR: dataDir, PORT: String(await freePort()) });
      expectOneLine(
        r,
        new RegExp(
          `^imagegen: PostgreSQL \\(pid ${pgPid}\\) is still running on .+pg, left by an imagegen that did not stop: stop it \\(kill ${pgPid}\\)`,
        ),
      );
    } finally {
      await stopPostgres(dataDir); // the PostgreSQL this test orphaned
    }
  }, 60_000);
});

describe('a standalone service waits for NATS, saying so, and gives up after NATS_CONNECT_TIMEOUT_MS', () => {
  it('logs that it waits every few seconds, then one line and exit 2', async () => {
    const closed = await freePort();
    const r = await run(
      'services/webhook-dispatcher/src/main.ts',
      {
        NATS_URL: `nats://app:secret@127.0.0.1:${closed}`,
        NATS_CONNECT_TIMEOUT_MS: '6000',
        DATABASE_URL: 'postgres://postgres@127.0.0.1:1/unused',
        GRPC_PORT: '0',
      },
      45_000,
    );
    expectOneLine(
      r,
      new RegExp(
        `^webhook-dispatcher: NATS at nats://app:\\*\\*\\*@127\\.0\\.0\\.1:${closed} \\(NATS_URL\\) unreachable \\(connection refused\\); gave up after 6 s \\(NATS_CONNECT_TIMEOUT_MS=6000\\)$`,
      ),
    );
    const waiting = r.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .filter((l) => l.level === 40 && /^waiting for NATS at .+ \(NATS_URL\): connection refused; .*giving up in \d+ s/.test(l.msg));
    expect(waiting.length).toBeGreaterThanOrEqual(2); // at once, and again a few seconds later
    expect(`${r.stdout}${r.stderr}`).not.toContain('secret');
  }, 60_000);
});
