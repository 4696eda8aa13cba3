import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../../test/support/wait.js';
import { createDb, createTestDatabase, migrate } from '../../src/db.js';
import { createNatsTransport, type EventMessage, startOutboxRelay, writeOutbox } from '../../src/events/index.js';

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
    await waitFor(() => received.length === 1);

    await stop();
    await waitFor(() => !transport.healthy());
    await expect(transport.publish({ id: randomUUID(), subject: 'r.b', data: new Uint8Array([2]), headers: {} })).rejects.toThrow();

    await start();
    await waitFor(() => transport.healthy());
    await transport.publish({ id: randomUUID(), subject: 'r.c', data: new Uint8Array([3]), headers: {} });
    await waitFor(() => received.some((m) => m.subject === 'r.c'));
    await sub.stop();
    await transport.close();
  }, 20_000);

  it('re-sends recent events when NATS comes back with an empty store (the stream was re-created)', async () => {
    if (!server || server.exitCode !== null) {
      port ||= await freePort();
      await start();
    }
    const db = await createTestDatabase(undefined, 'natsreset');
    const sql = createDb(db.url, { schema: 'reset', max: 2 });
    await migrate(sql, 'reset');
    const transport = await createNatsTransport({
      url: `nats://127.0.0.1:${port}`,
      streamName: 'RESET',
      subjectPrefix: 'z',
      logger: pino({ level: 'silent' }),
      reconnectTimeWaitMs: 100,
      publishTimeoutMs: 500,
    });
    const relay = await startOutboxRelay({ sql, schema: 'reset', transport, logger: pino({ level: 'silent' }), pollMs: 50 });
    try {
      // Published and acknowledged by JetStream, but no consumer has read them yet ...
      for (let i = 0; i < 3; i++) await sql.begin((tx) => writeOutbox(tx, { subject: 'z.thing', data: new Uint8Array([i]) }));
      const published = async () => (await sql`SELECT count(*)::int AS n FROM reset.outbox WHERE published_at IS NOT NULL`)[0].n;
      await waitFor(async () => (await published()) === 3, { message: 'the relay to mark its 3 rows published' });
      // ... when the node loses its store.
      await stop();
      rmSync(dir, { recursive: true, force: true });
      await start();
      await waitFor(() => transport.healthy(), { timeout: 10_000 });
      const received: EventMessage[] = [];
      const sub = await transport.subscribe({ durable: 'late', subjects: ['z.>'], handler: async (m) => void received.push(m) });
      await waitFor(() => received.length >= 3, { timeout: 10_000 });
      expect(new Set(received.map((m) => m.id)).size).toBe(3);
      await sub.stop();
    } finally {
      await relay.stop();
      await transport.close();
      await sql.end();
      await db.drop();
    }
  }, 30_000);

  it('a subscription made while the stream is missing re-creates it (and publishers are told of the reset)', async () => {
    if (!server || server.exitCode !== null) {
      port ||= await freePort();
      await start();
    }
    const url = `nats://127.0.0.1:${port}`;
    const transport = await createNatsTransport({ url, streamName: 'GONE', subjectPrefix: 'g', logger: pino({ level: 'silent' }) });
    let resets = 0;
    transport.onStreamReset?.(() => resets++);
    // The state right after a node came back with an empty store, before the reconnect check ran.
    const nc = await connect({ servers: url });
    await (await jetstreamManager(nc)).streams.delete('GONE');
    await nc.close();
    try {
      const received: EventMessage[] = [];
      const sub = await transport.subscribe({ durable: 'svc', subjects: ['g.>'], handler: async (m) => void received.push(m) });
      expect(resets).toBe(1);
      await transport.publish({ id: randomUUID(), subject: 'g.a', data: new Uint8Array([1]), headers: {} });
      await waitFor(() => received.length === 1);
      await sub.stop();
    } finally {
      await transport.close();
    }
  }, 20_000);
});
