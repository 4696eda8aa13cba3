import { readFileSync } from 'node:fs';
import { mkdir, open, readFile, unlink } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { ConfigError, StartupError } from '@imagegen/platform';
import postgres from 'postgres';

/**
 * Start-up checks of the all-in-one runner, each failing with one line that names the setting or the cause
 * (main.ts prints it and exits 2): the data folder of a running instance, PostgreSQL unreachable. The port
 * check is assertCanListen (platform), NATS waits in createNatsTransport, settings are loadConfig's.
 */

/** Whether `pid` is a live process whose command line matches `what` (a reused pid of another program is not). */
export function processAlive(pid: number, what: RegExp): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    return what.test(readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' '));
  } catch {
    return true; // no /proc (macOS): trust kill(0)
  }
}

/**
 * Claims `$DATA_DIR/imagegen.pid` for this process (exclusive create; a stale file of a process that is gone is
 * taken over). Another live instance on the same folder is a StartupError: its embedded PostgreSQL holds the
 * folder, and a second one would die on PostgreSQL's lock (which used to end the process printing `undefined`).
 */
export async function lockDataDir(dataDir: string): Promise<{ release(): Promise<void> }> {
  const file = join(dataDir, 'imagegen.pid');
  // A fresh machine has no DATA_DIR yet (`pnpm start` creates ./data).
  await mkdir(dataDir, { recursive: true });
  for (let attempt = 0; ; attempt++) {
    try {
      const fh = await open(file, 'wx', 0o644);
      await fh.writeFile(`${process.pid}\n`);
      await fh.close();
      return {
        async release() {
          const held = await readFile(file, 'utf8').catch(() => '');
          if (Number(held.trim()) === process.pid) await unlink(file).catch(() => {});
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw err;
      const pid = Number((await readFile(file, 'utf8').catch(() => '')).trim());
      if (pid !== process.pid && processAlive(pid, /node|imagegen|stack/)) {
        throw new StartupError(
          `DATA_DIR ${resolve(dataDir)} is in use by another running imagegen (pid ${pid}): stop it first, or set another DATA_DIR`,
          'DATA_DIR_IN_USE',
        );
      }
      await unlink(file).catch(() => {});
    }
  }
}

/** host:port of a PostgreSQL URL, for messages (never the credentials). */
function where(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || '5432'}`;
  } catch {
    return 'DATABASE_URL';
  }
}

/**
 * Connects once to DATABASE_URL (5 s budget) so that an unreachable server, refused credentials or a missing
 * database is one clear line before any module starts, not a bare ECONNREFUSED from deep inside one.
 */
export async function checkDatabase(url: string, timeoutS = 5): Promise<void> {
  const at = where(url);
  const db = (() => {
    try {
      return new URL(url).pathname.replace(/^\//, '') || 'postgres';
    } catch {
      return '';
    }
  })();
  const sql = postgres(url, {
    max: 1,
    connect_timeout: timeoutS,
    idle_timeout: 1,
    onnotice: () => {},
    connection: { application_name: 'imagegen-startup-check' },
  });
  try {
    await sql`SELECT 1`;
  } catch (err) {
    const e = err as { code?: string; message?: string };
    const code = e.code ?? '';
    const reason =
      code === 'ECONNREFUSED'
        ? 'connection refused: is PostgreSQL running there?'
        : code === 'ENOTFOUND' || code === 'EAI_AGAIN'
          ? 'host not found'
          : code === 'CONNECT_TIMEOUT' || code === 'ETIMEDOUT'
            ? `no answer within ${timeoutS} s`
            : code === '28P01' || code === '28000'
              ? `the credentials were refused (${e.message})`
              : code === '3D000'
                ? `database "${db}" does not exist: create it (createdb ${db}) or name another in DATABASE_URL`
                : (e.message ?? String(err)).split('\n')[0];
    throw new StartupError(`cannot use PostgreSQL at ${at} (DATABASE_URL): ${reason}`, code || undefined);
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}

/**
 * The one line to print for a start-up failure whose cause is outside the code, or undefined for a real bug
 * (which keeps its stack trace). Listen and file-system errors that escaped a check are named here too.
 */
export function startupErrorLine(err: unknown): string | undefined {
  if (err instanceof StartupError || err instanceof ConfigError) return err.message;
  const e = err as NodeJS.ErrnoException & { address?: string; port?: number };
  if (e && typeof e === 'object' && e.syscall === 'listen' && e.code) {
    return e.code === 'EADDRINUSE'
      ? `${e.address ?? ''}:${e.port ?? ''} is already in use (${e.code}): stop the program using it or change PORT/HOST`
      : `cannot listen on ${e.address ?? ''}:${e.port ?? ''} (${e.code})`;
  }
  if (e && typeof e === 'object' && e.path && e.code && ['EACCES', 'EPERM', 'EROFS', 'ENOSPC', 'ENOTDIR', 'EEXIST'].includes(e.code)) {
    return `cannot ${e.syscall ?? 'use'} ${e.path} (${e.code}): check DATA_DIR (or the folder's permissions and free space)`;
  }
  return undefined;
}
