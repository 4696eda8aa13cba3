import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { freePort } from '../support/stack.js';
import { waitFor } from '../support/wait.js';

/**
 * The quick start for real: `pnpm start` with no database, NATS, S3 or provider settings, i.e. embedded
 * PostgreSQL, filesystem objects, in-process events and the sandbox provider.
 */
const repo = new URL('../../', import.meta.url).pathname;
const dataDir = mkdtempSync(join(tmpdir(), 'imagegen-quickstart-'));
let child: ChildProcess | undefined;

afterAll(async () => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

function cleanEnv(port: number): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: 'warn' };
}

async function startStack(port: number): Promise<{ out: () => string; proc: ChildProcess }> {
  let out = '';
  const proc = spawn(process.execPath, ['--import', 'tsx', 'services/stack/src/main.ts'], { cwd: repo, env: cleanEnv(port) });
  proc.stdout?.on('data', (d) => (out += d));
  proc.stderr?.on('data', (d) => (out += d));
  await waitFor(() => /Demo tenant/.test(out) || proc.exitCode !== null, { timeout: 90_000, interval: 200, message: 'the banner' }).catch(
    (err) => {
      throw new Error(`stack did not print its banner:\n${out}`, { cause: err });
    },
  );
  if (!/Demo tenant/.test(out)) throw new Error(`stack exited early:\n${out}`);
  return { out: () => out, proc };
}

async function stop(proc: ChildProcess): Promise<number | null> {
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  proc.kill('SIGTERM');
  return exited;
}

function postgresProcessesUsing(dir: string): number {
  try {
    return execFileSync('pgrep', ['-f', join(dir, 'pg')])
      .toString()
      .trim()
      .split('\n')
      .filter(Boolean).length;
  } catch {
    return 0;
  }
}

test('pnpm start: embedded defaults, banner with credentials, demo key works, clean stop, data reused', async () => {
  const port = await freePort();
  const first = await startStack(port);
  child = first.proc;
  const banner = first.out();
  expect(banner).toContain(`http://localhost:${port}`);
  const adminToken = /Admin token:\s+(\S+)/.exec(banner)?.[1] as string;
  const demoKey = /test API key:\s+(sk_test_[A-Za-z0-9]+)/.exec(banner)?.[1] as string;
  expect(adminToken).toBeTruthy();
  expect(demoKey).toMatch(/^sk_test_[A-Za-z0-9]{32,}$/);

  const health = await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.json());
  expect(health.status).toBe('ok');
  const profile = await fetch(`http://127.0.0.1:${port}/api/profile`, { headers: { 'x-api-key': demoKey } });
  expect(profile.status).toBe(200);
  const tenants = await fetch(`http://127.0.0.1:${port}/admin/tenants`, { headers: { 'x-admin-token': adminToken } });
  expect(tenants.status).toBe(200);
  // The embedded PostgreSQL keeps its data under DATA_DIR/pg.
  expect(readFileSync(join(dataDir, 'pg', 'PG_VERSION'), 'utf8').trim()).toMatch(/^\d+/);

  expect(await stop(first.proc)).toBe(0);
  expect(postgresProcessesUsing(dataDir)).toBe(0);

  // Second start reuses the same data: same admin token, same demo tenant and key.
  const second = await startStack(port);
  child = second.proc;
  expect(second.out()).toContain(adminToken);
  expect(second.out()).toContain(demoKey);
  const again = await fetch(`http://127.0.0.1:${port}/api/profile`, { headers: { 'x-api-key': demoKey } });
  expect(again.status).toBe(200);
  expect(await stop(second.proc)).toBe(0);
  expect(postgresProcessesUsing(dataDir)).toBe(0);
}, 180_000);
