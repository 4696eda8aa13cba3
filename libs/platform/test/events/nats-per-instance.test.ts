import { randomUUID } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pino from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { waitFor } from '../../../../test/support/wait.js';
import { createNatsTransport, type EventMessage, type EventTransport, subjectFor } from '../../src/events/index.js';
import { NATS_URL } from './nats-support.js';

/** Two processes (two transports) on one stream: perInstance gives each every message; a plain durable splits them. */
const tag = `t${randomUUID().replace(/-/g, '').slice(0, 10)}`;
const streamName = `TEST_${tag}`;
let a: EventTransport;
let b: EventTransport;

beforeAll(async () => {
  const make = () => createNatsTransport({ url: NATS_URL, streamName, subjectPrefix: tag, logger: pino({ level: 'silent' }) });
  a = await make();
  b = await make();
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
  const nc = await connect({ servers: NATS_URL });
  await (await jetstreamManager(nc)).streams.delete(streamName).catch(() => {});
  await nc.close();
});

async function consumerNames(): Promise<string[]> {
  const nc = await connect({ servers: NATS_URL });
  try {
    const names: string[] = [];
    for await (const c of (await jetstreamManager(nc)).consumers.list(streamName)) names.push(c.name);
    return names;
  } finally {
    await nc.close();
  }
}

it('perInstance: every process gets every message (its own consumer, removed on stop); a shared durable splits them', async () => {
  const subject = subjectFor(tag, 'tenancy.tenant_changed');
  const got = { a: [] as EventMessage[], b: [] as EventMessage[], sharedA: [] as EventMessage[], sharedB: [] as EventMessage[] };
  const subs = await Promise.all([
    a.subscribe({ durable: 'caches', subjects: [subject], perInstance: true, handler: async (m) => void got.a.push(m) }),
    b.subscribe({ durable: 'caches', subjects: [subject], perInstance: true, handler: async (m) => void got.b.push(m) }),
    a.subscribe({ durable: 'work', subjects: [subject], handler: async (m) => void got.sharedA.push(m) }),
    b.subscribe({ durable: 'work', subjects: [subject], handler: async (m) => void got.sharedB.push(m) }),
  ]);
  const ids = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
  for (const id of ids) await a.publish({ id, subject, data: new Uint8Array([1]), headers: {} });
  await waitFor(() => got.a.length === 4 && got.b.length === 4 && got.sharedA.length + got.sharedB.length === 4, {
    timeout: 10_000,
    message: 'deliveries',
  });
  expect(got.a.map((m) => m.id)).toEqual(ids);
  expect(got.b.map((m) => m.id)).toEqual(ids);
  expect([...got.sharedA, ...got.sharedB].map((m) => m.id).sort()).toEqual([...ids].sort());
  const names = await consumerNames();
  expect(names.filter((n) => n.startsWith('caches-'))).toHaveLength(2);
  await Promise.all(subs.map((s) => s.stop()));
  expect((await consumerNames()).filter((n) => n.startsWith('caches-'))).toEqual([]);
  expect(await consumerNames()).toContain('work');
});
