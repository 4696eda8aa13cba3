import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';

/**
 * The patch of the postgres client (patches/postgres@3.4.9.patch, pnpm patchedDependencies):
 * - porsager/postgres#1154 / #1208 (PRs #1168, #1209): a write on a connection whose socket is gone threw
 *   `TypeError: Cannot read properties of null (reading 'write')` from setImmediate, an uncaught exception
 *   that ended the process (generation and usage-metering died this way when PostgreSQL stopped under load);
 * - teardown cleared the deferred write's timer without resetting it, so a pooled connection that closed with
 *   a write pending never flushed again: its next startup message stayed buffered until connect_timeout.
 *
 * The scenario runs in a child process (an uncaught exception must not take the test worker down).
 * PG_MODULE (default `postgres`, the patched package) lets the script run against an unpatched copy, e.g.
 * PG_MODULE=$PWD/node_modules/.pnpm/postgres@3.4.9/node_modules/postgres/src/index.js (it fails there).
 * The second fix has no test here: its race (a close processed while a deferred write waits for the check
 * phase) could not be produced deterministically.
 */

const PLATFORM_DIR = fileURLToPath(new URL('..', import.meta.url));
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

function runScript(script: string, env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['--input-type=module', '-e', script], {
      cwd: PLATFORM_DIR,
      env: { PATH: process.env.PATH ?? '', ...(process.env.PG_MODULE ? { PG_MODULE: process.env.PG_MODULE } : {}), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
    });
    p.stderr.on('data', (d) => {
      out += d;
    });
    const timer = setTimeout(() => p.kill('SIGKILL'), 20_000);
    p.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

test('a query on a reserved connection whose backend died rejects with CONNECTION_CLOSED (no uncaught TypeError)', async () => {
  const script = `
    const { default: postgres } = await import(process.env.PG_MODULE ?? 'postgres');
    const sql = postgres(process.env.URL, { max: 2, onnotice() {} });
    const r = await sql.reserve();
    const [{ pid }] = await r\`SELECT pg_backend_pid() AS pid\`;
    await sql\`SELECT pg_terminate_backend(\${pid})\`;
    await new Promise((res) => setTimeout(res, 300));
    try {
      await r\`SELECT 1\`;
      console.log('RESOLVED');
    } catch (e) {
      console.log('REJECTED ' + e.code);
    }
    r.release();
    await sql.end({ timeout: 1 });
    console.log('END');
  `;
  const r = await runScript(script, { URL: DATABASE_URL });
  expect(r.out).not.toMatch(/TypeError/);
  expect(r.out).toContain('REJECTED CONNECTION_CLOSED');
  expect(r.out).toContain('END');
  expect(r.code).toBe(0);
});
