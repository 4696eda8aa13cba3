import { constants, existsSync } from 'node:fs';
import { chown, copyFile, lstat, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import postgres from 'postgres';
import { processAlive } from './startup.js';

/**
 * `pnpm backup <folder>`: an online backup of the all-in-one's data folder (issue 40, item 3), while it serves.
 * The result is itself a data folder: `DATA_DIR=<folder> pnpm start` is the restore.
 *
 * 1. The database, with PostgreSQL's low-level base backup: a temporary physical replication slot (so no WAL
 *    the copy needs is recycled while it runs), pg_backup_start, a copy of `pg/` as it is, pg_backup_stop,
 *    its backup_label written into the copy, then the WAL written meanwhile. Started on the copy, PostgreSQL
 *    replays that WAL to the moment of pg_backup_stop: a consistent database (the embedded PostgreSQL ships
 *    no pg_dump).
 * 2. Then the objects: every file the database can list was written before its row (object-gc.ts), and a
 *    deleted image's files stay for OBJECT_DELETE_GRACE, so a copy made after the database and finished within
 *    the grace holds every object the backup lists.
 * 3. The local secrets (secrets.json: credentials key, admin token): the database is useless without them.
 *
 * A stopped stack needs none of this: a plain copy of the folder is a backup.
 */

/** Files of a running cluster that a base backup leaves out (PostgreSQL docs, "Making a Base Backup Using the Low Level API"). */
const PG_SKIPPED_FILES = new Set(['postmaster.pid', 'postmaster.opts', 'backup_label', 'tablespace_map']);
/** Directories whose contents are left out (kept empty: PostgreSQL expects them). */
const PG_EMPTIED_DIRS = new Set([
  'pg_wal',
  'pg_replslot',
  'pg_stat_tmp',
  'pg_dynshmem',
  'pg_notify',
  'pg_serial',
  'pg_snapshots',
  'pg_subtrans',
]);

export interface BackupResult {
  folder: string;
  /** False when DATA_DIR holds no embedded database (DATABASE_URL is set): only the objects were copied. */
  database: boolean;
  /** The WAL position the restored database is consistent at. */
  stopLsn: string;
  files: number;
  bytes: number;
  ms: number;
}

/**
 * Copies `from` into `to` (created), keeping each file's mode and owner (as root, the embedded PostgreSQL runs
 * as its own user, which must own its files in the restored folder). Files that vanish during the copy (a
 * running database drops and renames files) are skipped: the WAL replay recreates what the backup needs.
 */
async function copyTree(
  from: string,
  to: string,
  opts: { skipFiles?: Set<string>; emptyDirs?: Set<string>; overwrite?: boolean },
  count: { files: number; bytes: number },
): Promise<void> {
  const st = await lstat(from);
  await mkdir(to, { recursive: true, mode: st.mode & 0o777 });
  await chown(to, st.uid, st.gid).catch(() => {});
  let entries: string[];
  try {
    entries = await readdir(from);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  for (const name of entries) {
    const src = join(from, name);
    const dst = join(to, name);
    let s: Awaited<ReturnType<typeof lstat>>;
    try {
      s = await lstat(src);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    if (s.isDirectory()) {
      if (opts.emptyDirs?.has(name)) {
        await mkdir(dst, { recursive: true, mode: s.mode & 0o777 });
        await chown(dst, s.uid, s.gid).catch(() => {});
      } else await copyTree(src, dst, { ...opts, emptyDirs: undefined }, count);
      continue;
    }
    if (!s.isFile() || opts.skipFiles?.has(name)) continue;
    try {
      await copyFile(src, dst, opts.overwrite === false ? constants.COPYFILE_EXCL : 0);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'EEXIST') continue;
      throw err;
    }
    await chown(dst, s.uid, s.gid).catch(() => {});
    count.files++;
    count.bytes += s.size;
  }
}

/** The running embedded PostgreSQL of a data folder: its port, from postmaster.pid (line 4). */
async function runningPostgresPort(pgDir: string): Promise<number | undefined> {
  const lines = (await readFile(join(pgDir, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n');
  const pid = Number(lines[0]);
  return processAlive(pid, /postgres/) ? Number(lines[3]) : undefined;
}

export async function backupDataDir(dataDir: string, folder: string): Promise<BackupResult> {
  const started = Date.now();
  const from = resolve(dataDir);
  const to = resolve(folder);
  if (to === from || to.startsWith(`${from}/`)) throw new Error('the backup folder must be outside DATA_DIR');
  if ((await readdir(to).catch(() => [])).length > 0) throw new Error(`${to} is not empty`);
  const count = { files: 0, bytes: 0 };
  const pgDir = join(from, 'pg');
  const hasPg = existsSync(join(pgDir, 'PG_VERSION'));
  if (!hasPg && !existsSync(join(from, 'objects'))) throw new Error(`${from} holds no imagegen data (no pg/ nor objects/)`);
  const port = hasPg ? await runningPostgresPort(pgDir) : undefined;
  let stopLsn = '';
  if (!hasPg) {
    // DATABASE_URL names a server of its own: back it up with pg_dump first (README, "Backups"), then run this.
  } else if (port) {
    // One connection holds the slot and the backup: both end with it if this process dies.
    const sql = postgres(`postgres://postgres:imagegen-local@127.0.0.1:${port}/postgres`, { max: 1, onnotice: () => {} });
    try {
      await sql`SELECT pg_create_physical_replication_slot(${`imagegen_backup_${process.pid}`}, true, true)`;
      await sql`SELECT pg_backup_start('imagegen backup', true)`;
      await copyTree(pgDir, join(to, 'pg'), { skipFiles: PG_SKIPPED_FILES, emptyDirs: PG_EMPTIED_DIRS }, count);
      const [stop] = await sql`SELECT lsn::text, labelfile, spcmapfile FROM pg_backup_stop(false)`;
      stopLsn = stop.lsn as string;
      await writeFile(join(to, 'pg', 'backup_label'), stop.labelfile as string, { mode: 0o600 });
      if (stop.spcmapfile) await writeFile(join(to, 'pg', 'tablespace_map'), stop.spcmapfile as string, { mode: 0o600 });
      const pgSt = await lstat(pgDir);
      for (const f of ['backup_label', 'tablespace_map']) await chown(join(to, 'pg', f), pgSt.uid, pgSt.gid).catch(() => {});
      // The WAL from the backup's start to its stop: the slot kept every segment of it.
      await sql`SELECT pg_switch_wal()`;
      await copyTree(join(pgDir, 'pg_wal'), join(to, 'pg', 'pg_wal'), { skipFiles: new Set() }, count);
    } finally {
      await sql.end();
    }
  } else {
    await copyTree(pgDir, join(to, 'pg'), { skipFiles: new Set(['postmaster.pid', 'postmaster.opts']) }, count);
  }
  // After the database: the objects it lists were written before it (and deleted ones stay for the grace).
  await copyTree(join(from, 'objects'), join(to, 'objects'), {}, count);
  for (const f of ['secrets.json']) {
    await copyFile(join(from, f), join(to, f)).catch((err) => {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    });
  }
  return { folder: to, database: hasPg, stopLsn, files: count.files, bytes: count.bytes, ms: Date.now() - started };
}

// `pnpm backup <folder>` (DATA_DIR as for `pnpm start`).
if (import.meta.url === `file://${process.argv[1]}`) {
  const folder = process.argv[2];
  if (!folder) {
    console.error('usage: pnpm backup <folder>   (backs up DATA_DIR, default ./data, while imagegen runs or not)');
    process.exit(2);
  }
  backupDataDir(process.env.DATA_DIR ?? './data', folder).then(
    (r) =>
      console.log(
        `backup in ${r.folder}: ${r.files} files, ${(r.bytes / 1e6).toFixed(1)} MB in ${r.ms} ms${r.stopLsn ? `, database consistent at ${r.stopLsn}` : ''}\n` +
          (r.database ? '' : 'no embedded database in DATA_DIR (DATABASE_URL): back that database up with pg_dump BEFORE this copy\n') +
          `restore: stop imagegen, then DATA_DIR=${r.folder} pnpm start (or move it to ./data)`,
      ),
    (err) => {
      console.error(`backup failed: ${(err as Error).message}`);
      process.exit(1);
    },
  );
}
