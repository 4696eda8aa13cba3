/**
 * A private PostgreSQL server for fault-injection tests: one the test may stop, crash and start again at
 * will, never the machine's shared instance (other test files use it at the same time).
 *
 * ```ts
 * import { startPrivatePostgres } from '../support/private-postgres.js';
 * const pg = await startPrivatePostgres();     // running, on a free loopback port
 * pg.url;                                      // postgres://postgres@127.0.0.1:<port>/postgres (trust auth)
 * await pg.stop();                             // fast shutdown (SIGINT): sessions are terminated (57P01), port closed
 * await pg.start();                            // the same data directory, the same port
 * await pg.crash();                            // SIGKILL of the postmaster (the backends go too); start() recovers
 * await pg.close();                            // stop (if running) and remove the data directory
 * ```
 *
 * API
 * - `startPrivatePostgres(opts?)`: `opts.settings` adds `-c name=value` server settings (e.g.
 *   `{ max_connections: '200' }`); `opts.port` fixes the port (default: a free one below the ephemeral
 *   range, kept across stop/start so clients reconnect to the same address).
 * - `url`, `port`, `dataDir`; `running` (a postmaster of ours is up).
 * - `start()`: starts the server and resolves when it accepts connections (rejects after 30 s).
 *   No-op when running.
 * - `stop()`: fast shutdown (`SIGINT` to the postmaster, what `pg_ctl stop -m fast` sends); resolves when
 *   the postmaster has exited (SIGKILL after 10 s). No-op when stopped.
 * - `crash()`: SIGKILL to the postmaster and its backends; the next start() runs crash recovery.
 * - `close()`: stop() and remove the data directory. A process exit also kills a server left running and
 *   removes its data directory.
 *
 * How: the PostgreSQL binaries of the machine (/usr/lib/postgresql/<newest>/bin, or PG_BIN) refuse to run
 * as root, so when this process is root the server runs as `nobody` (the spawn's uid/gid, equivalent to
 * `runuser -u nobody --` but leaving the postmaster our direct child, so signals reach it); the data
 * directory, under os.tmpdir(), belongs to that user. initdb runs once per machine and PostgreSQL version
 * (a template cluster, `-A trust`, no sync, kept as os.tmpdir()/imagegen-pgtpl-<version>-<uid>) and each
 * server starts from a copy of it: a start takes well under a second. Settings are lean: fsync,
 * full_page_writes and synchronous_commit off, small shared_buffers, TCP on 127.0.0.1 only, the Unix
 * socket in the data dir, only FATAL messages logged (the last 4 KB of stderr appear in start errors).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chownSync, cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { waitFor } from './wait.js';

export interface PrivatePostgres {
  url: string;
  port: number;
  dataDir: string;
  readonly running: boolean;
  start(): Promise<void>;
  stop(): Promise<void>;
  crash(): Promise<void>;
  close(): Promise<void>;
}

export interface PrivatePostgresOptions {
  port?: number;
  settings?: Record<string, string>;
}

const NOBODY = 65534;
const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const owner = asRoot ? { uid: NOBODY, gid: NOBODY } : {};

/** The bin directory of the newest PostgreSQL installed under /usr/lib/postgresql (or PG_BIN). */
export function postgresBinDir(): string {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, 'bin', 'postgres')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) throw new Error('no PostgreSQL binaries under /usr/lib/postgresql (set PG_BIN)');
  return join(root, versions[0], 'bin');
}

function chownTree(path: string) {
  if (!asRoot) return;
  chownSync(path, NOBODY, NOBODY);
  if (statSync(path).isDirectory()) for (const e of readdirSync(path)) chownTree(join(path, e));
}

function run(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, {
      ...owner,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C' },
    });
    let err = '';
    p.stderr?.on('data', (d) => {
      err += d;
    });
    p.once('error', reject);
    p.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} exited with ${code}: ${err.slice(-2000)}`))));
  });
}

let template: Promise<string> | undefined;

/**
 * The template cluster each server copies: made by initdb once per machine and PostgreSQL version (kept under
 * os.tmpdir(), reused by later processes), into a temporary directory renamed into place, so processes that
 * race both succeed and use the first one's.
 */
function templateCluster(): Promise<string> {
  template ??= (async () => {
    const bin = postgresBinDir();
    const dir = join(tmpdir(), `imagegen-pgtpl-${basename(dirname(bin))}-${asRoot ? NOBODY : (process.getuid?.() ?? 0)}`);
    if (existsSync(join(dir, 'PG_VERSION'))) return dir;
    const base = mkdtempSync(join(tmpdir(), 'imagegen-pgtpl-tmp-'));
    try {
      chownTree(base);
      const fresh = join(base, 'data');
      await run(join(bin, 'initdb'), [
        '-D',
        fresh,
        '-U',
        'postgres',
        '-A',
        'trust',
        '-E',
        'UTF8',
        '--locale=C',
        '--no-sync',
        '--no-instructions',
      ]);
      try {
        renameSync(fresh, dir);
      } catch (err) {
        if (!existsSync(join(dir, 'PG_VERSION'))) throw err; // else another process made it first
      }
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
    return dir;
  })();
  return template;
}

/** A free port below Linux's ephemeral range, so no outgoing connection takes it while the server is down. */
async function pickPort(): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = 33_000 - 12_000 + Math.floor(Math.random() * 11_000);
    const ok = await new Promise<boolean>((res) => {
      const srv = createServer();
      srv.once('error', () => res(false));
      srv.listen(port, '127.0.0.1', () => srv.close(() => res(true)));
    });
    if (ok) return port;
  }
  throw new Error('no free port for the private PostgreSQL');
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

const live = new Set<ChildProcess>();
const dataDirs = new Set<string>();
process.once('exit', () => {
  for (const p of live) p.kill('SIGKILL');
  for (const d of dataDirs) rmSync(d, { recursive: true, force: true });
});

export async function startPrivatePostgres(opts: PrivatePostgresOptions = {}): Promise<PrivatePostgres> {
  const tpl = await templateCluster();
  const base = mkdtempSync(join(tmpdir(), 'imagegen-pg-'));
  const dataDir = join(base, 'data');
  dataDirs.add(base);
  cpSync(tpl, dataDir, { recursive: true });
  chownTree(base);
  const port = opts.port ?? (await pickPort());
  const settings: Record<string, string> = {
    listen_addresses: '127.0.0.1',
    unix_socket_directories: dataDir,
    fsync: 'off',
    full_page_writes: 'off',
    synchronous_commit: 'off',
    shared_buffers: '16MB',
    max_connections: '150',
    logging_collector: 'off',
    log_min_messages: 'fatal',
    ...opts.settings,
  };
  const args = ['-D', dataDir, '-p', String(port), ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
  let proc: ChildProcess | undefined;
  let log = '';

  const start = async () => {
    if (proc) return;
    log = '';
    const p = spawn(join(postgresBinDir(), 'postgres'), args, {
      ...owner,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { PATH: process.env.PATH ?? '', LC_ALL: 'C' },
    });
    p.stderr?.on('data', (d) => {
      log = (log + d).slice(-4000);
    });
    proc = p;
    live.add(p);
    p.once('exit', () => {
      live.delete(p);
      if (proc === p) proc = undefined;
    });
    const exited = () => p.exitCode !== null || p.signalCode !== null;
    // Accepting TCP is not enough (the server may still be recovering): wait until it takes a session.
    await waitFor(async () => exited() || ((await accepts(port)) && (await ready(port))), {
      timeout: 30_000,
      interval: 50,
      message: `private PostgreSQL on port ${port} to take a session`,
    }).catch((err) => {
      throw new Error(`private PostgreSQL did not come up: ${log}`, { cause: err });
    });
    if (exited()) throw new Error(`private PostgreSQL exited at start: ${log}`);
  };

  const halt = async (signal: NodeJS.Signals) => {
    const p = proc;
    if (!p) return;
    const exited = new Promise((r) => p.once('exit', r));
    if (signal === 'SIGKILL') {
      // The postmaster's children (backends, checkpointer, ...) are not in our process table: SIGKILL of the
      // postmaster alone would leave them holding the port and shared memory. Kill the whole uid's tree.
      killChildren(p.pid as number);
    }
    p.kill(signal);
    const timer = setTimeout(() => p.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
    proc = undefined;
  };

  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    dataDir,
    get running() {
      return proc !== undefined;
    },
    start,
    stop: () => halt('SIGINT'),
    crash: () => halt('SIGKILL'),
    async close() {
      await halt('SIGINT');
      rmSync(base, { recursive: true, force: true });
      dataDirs.delete(base);
    },
  };
}

/** SIGKILL to the direct children of `pid` (from /proc). */
function killChildren(pid: number) {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) process.kill(Number(entry), 'SIGKILL');
    } catch {}
  }
}

/** The server takes sessions (pg_isready: 0 = accepting; 1 = rejecting, e.g. still starting up or recovering). */
function ready(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const p = spawn(join(postgresBinDir(), 'pg_isready'), ['-q', '-h', '127.0.0.1', '-p', String(port), '-t', '2'], { stdio: 'ignore' });
    p.once('error', () => resolve(false));
    p.once('exit', (code) => resolve(code === 0));
  });
}
