import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { createNatsTransport, type EventMessage } from '../../src/events/index.js';

// Restarting the shared NATS is not ours to do: this test runs its own nats-server on a free port.
const bin = (() => {
  try {
    return execFileSync('sh', ['-c', 'command -v nats-server'], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
})();

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

async function until(cond: () => boolean, timeoutMs = 8000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.skipIf(!bin)('nats transport across a server restart', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nats-restart-'));
  let server: ChildProcess | undefined;
  let port = 0;

  const start = async () => {
    server = spawn(bin, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], { stdio: 'ignore' });
  };
  const stop = async () => {
    const s = server;
    if (!s || s.exitCode !== null) return;
    const exited = new Promise((r) => s.once('exit', r));
    s.kill('SIGTERM');
    await exited;
  };

  afterAll(async () => {
    await stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps consuming after NATS restarts', async () => {
    port = await freePort();
    await start();
    const transport = await createNatsTransport({
      url: `nats://127.0.0.1:${port}`,
      streamName: 'RESTART',
      subjectPrefix: 'r',
      logger: pino({ level: 'silent' }),
      reconnectTimeWaitMs: 100,
      publishTimeoutMs: 500,
    });
    const received: EventMessage[] = [];
    const sub = await transport.subscribe({ durable: 'svc', subjects: ['r.>'], handler: async (m) => void received.push(m) });
    await transport.publish({ id: randomUUID(), subject: 'r.a', data: new Uint8Array([1]), headers: {} });
    await until(() => received.length === 1);

    await stop();
    await until(() => !transport.healthy());
    await expect(transport.publish({ id: randomUUID(), subject: 'r.b', data: new Uint8Array([2]), headers: {} })).rejects.toThrow();

    await start();
    await until(() => transport.healthy());
    await transport.publish({ id: randomUUID(), subject: 'r.c', data: new Uint8Array([3]), headers: {} });
    await until(() => received.some((m) => m.subject === 'r.c'));
    await sub.stop();
    await transport.close();
  }, 20_000);
});
