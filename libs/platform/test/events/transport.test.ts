import { randomUUID } from 'node:crypto';
import { QuotaCrossed } from '@imagegen/contracts/events/v1/events';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../../test/support/wait.js';
import {
  createInProcessTransport,
  createNatsTransport,
  decodeOrSkip,
  type EventMessage,
  type EventTransport,
  subjectFor,
} from '../../src/events/index.js';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const logger = pino({ level: 'silent' });
// A failed handler's message comes back at once: a redelivery that should not happen then arrives before
// a marker published afterwards, so "nothing more arrived" is checked by waiting for the marker.
const noBackoff = { baseMs: 0, maxMs: 0 };

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);

interface Harness {
  transport: EventTransport;
  prefix: string;
  teardown(): Promise<void>;
}

const nats = async (): Promise<Harness> => {
  const tag = `t${randomUUID().replace(/-/g, '').slice(0, 10)}`;
  const streamName = `TEST_${tag}`;
  const transport = await createNatsTransport({ url: NATS_URL, streamName, subjectPrefix: tag, logger, retry: noBackoff });
  return {
    transport,
    prefix: tag,
    async teardown() {
      await transport.close();
      const nc = await connect({ servers: NATS_URL });
      await (await jetstreamManager(nc)).streams.delete(streamName).catch(() => {});
      await nc.close();
    },
  };
};

const inprocess = async (): Promise<Harness> => {
  const transport = createInProcessTransport({ logger, retry: noBackoff });
  return { transport, prefix: 'imagegen', teardown: () => transport.close() };
};

/** The semantics every transport must share; services only see this interface. */
describe.each([
  ['nats', nats],
  ['inprocess', inprocess],
])('%s transport', (kind, make) => {
  let h: Harness;
  let n = 0;
  // Each test gets its own subject space and durables, so tests never see each other's messages.
  const space = () => `s${++n}`;

  beforeAll(async () => {
    h = await make();
  });
  afterAll(async () => {
    await h?.teardown();
  });

  const collect = async (durable: string, subjects: string[], received: EventMessage[] = []) => {
    const sub = await h.transport.subscribe({ durable, subjects, handler: async (m) => void received.push(m) });
    return { received, sub };
  };

  it('reports its kind and health', () => {
    expect(h.transport.kind).toBe(kind);
    expect(h.transport.healthy()).toBe(true);
  });

  it('round-trips data and headers', async () => {
    const s = subjectFor(h.prefix, `${space()}.image_stored`);
    const { received, sub } = await collect('rt', [s]);
    const id = randomUUID();
    const headers = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tenant: 't1' };
    await h.transport.publish({ id, subject: s, data: bytes('hello'), headers });
    await waitFor(() => received.length === 1);
    const [m] = received;
    expect(m.id).toBe(id);
    expect(m.subject).toBe(s);
    expect(text(m.data)).toBe('hello');
    expect(m.headers).toEqual(headers);
    expect(m.redelivered).toBe(false);
    expect(m.deliveryCount).toBe(1);
    await sub.stop();
  });

  it('delivers the same id once', async () => {
    const s = subjectFor(h.prefix, `${space()}.dup`);
    const { received, sub } = await collect('dup', [s]);
    const id = randomUUID();
    await h.transport.publish({ id, subject: s, data: bytes('a'), headers: {} });
    await h.transport.publish({ id, subject: s, data: bytes('a'), headers: {} });
    const marker = randomUUID();
    await h.transport.publish({ id: marker, subject: s, data: bytes('end'), headers: {} });
    await waitFor(() => received.some((m) => m.id === marker));
    expect(received.map((m) => m.id)).toEqual([id, marker]);
    await sub.stop();
  });

  it('redelivers after a handler failure', async () => {
    const s = subjectFor(h.prefix, `${space()}.fail`);
    const seen: EventMessage[] = [];
    const sub = await h.transport.subscribe({
      durable: 'fail',
      subjects: [s],
      handler: async (m) => {
        seen.push(m);
        if (seen.length === 1) throw new Error('transient');
      },
    });
    const id = randomUUID();
    await h.transport.publish({ id, subject: s, data: bytes('x'), headers: {} });
    await waitFor(() => seen.length === 2);
    expect(seen[0].redelivered).toBe(false);
    expect(seen[1].redelivered).toBe(true);
    expect(seen[1].deliveryCount).toBe(2);
    // Acked after the success: the next message handled is one published afterwards, not a third delivery.
    const marker = randomUUID();
    await h.transport.publish({ id: marker, subject: s, data: bytes('end'), headers: {} });
    await waitFor(() => seen.some((m) => m.id === marker));
    expect(seen.map((m) => m.id)).toEqual([id, id, marker]);
    await sub.stop();
  });

  it('gives every durable every message', async () => {
    const sp = space();
    const a = await collect('two-a', [subjectFor(h.prefix, `${sp}.>`)]);
    const b = await collect('two-b', [subjectFor(h.prefix, `${sp}.>`)]);
    for (const i of [1, 2, 3]) {
      await h.transport.publish({ id: randomUUID(), subject: subjectFor(h.prefix, `${sp}.e${i}`), data: bytes(`${i}`), headers: {} });
    }
    await waitFor(() => a.received.length === 3 && b.received.length === 3);
    expect(a.received.map((m) => text(m.data))).toEqual(['1', '2', '3']);
    expect(b.received.map((m) => text(m.data))).toEqual(['1', '2', '3']);
    await Promise.all([a.sub.stop(), b.sub.stop()]);
  });

  it('resumes a durable after stop with what was published meanwhile', async () => {
    const s = subjectFor(h.prefix, `${space()}.resume`);
    const first = await collect('resume', [s]);
    await h.transport.publish({ id: randomUUID(), subject: s, data: bytes('1'), headers: {} });
    await waitFor(() => first.received.length === 1);
    await first.sub.stop();
    await h.transport.publish({ id: randomUUID(), subject: s, data: bytes('2'), headers: {} });
    await h.transport.publish({ id: randomUUID(), subject: s, data: bytes('3'), headers: {} });
    const second = await collect('resume', [s]);
    await waitFor(() => second.received.length === 2);
    expect(second.received.map((m) => text(m.data))).toEqual(['2', '3']);
    expect(first.received).toHaveLength(1); // stopped: nothing more to the old handler
    await second.sub.stop();
  });

  it('stop waits for the in-flight handler', async () => {
    const s = subjectFor(h.prefix, `${space()}.inflight`);
    let started = false;
    let finished = false;
    const sub = await h.transport.subscribe({
      durable: 'inflight',
      subjects: [s],
      handler: async () => {
        started = true;
        await new Promise((r) => setTimeout(r, 200));
        finished = true;
      },
    });
    await h.transport.publish({ id: randomUUID(), subject: s, data: bytes('x'), headers: {} });
    await waitFor(() => started);
    await sub.stop();
    expect(finished).toBe(true);
  });

  it('stops cleanly right after subscribing', async () => {
    const s = subjectFor(h.prefix, `${space()}.quick`);
    const first = await collect('quick', [s]);
    await first.sub.stop();
    await h.transport.publish({ id: randomUUID(), subject: s, data: bytes('1'), headers: {} });
    const second = await collect('quick', [s]);
    await waitFor(() => second.received.length === 1);
    expect(first.received).toHaveLength(0);
    await second.sub.stop();
  });

  it('acks an undecodable payload once (decodeOrSkip) instead of redelivering it forever', async () => {
    const s = subjectFor(h.prefix, `${space()}.quota_crossed`);
    const logged: unknown[] = [];
    const log = pino({ level: 'error' }, { write: (line: string) => void logged.push(JSON.parse(line)) });
    const seen: (QuotaCrossed | undefined)[] = [];
    let calls = 0;
    const sub = await h.transport.subscribe({
      durable: 'undecodable',
      subjects: [s],
      handler: async (m) => {
        calls++;
        seen.push(decodeOrSkip(QuotaCrossed, m, log));
      },
    });
    // field 1, length-delimited, claims 16 bytes that never come: protobuf decode throws
    await h.transport.publish({ id: randomUUID(), subject: s, data: new Uint8Array([0x0a, 0x10]), headers: {} });
    const good = QuotaCrossed.encode(QuotaCrossed.fromPartial({ tenantId: 'acme', threshold: 80 })).finish();
    await h.transport.publish({ id: randomUUID(), subject: s, data: good, headers: {} });
    await waitFor(() => seen.length === 2);
    // Skipped means acked: no redelivery follows, the next call is for a message published afterwards.
    const after = QuotaCrossed.encode(QuotaCrossed.fromPartial({ tenantId: 'after', threshold: 90 })).finish();
    await h.transport.publish({ id: randomUUID(), subject: s, data: after, headers: {} });
    await waitFor(() => seen.some((q) => q?.tenantId === 'after'));
    expect(calls).toBe(3);
    expect(seen[0]).toBeUndefined();
    expect(seen[1]?.tenantId).toBe('acme');
    expect(seen[2]?.tenantId).toBe('after');
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ msg: 'undecodable event skipped', subject: s });
    await sub.stop();
  });

  it('matches wildcard subjects like NATS', async () => {
    const sp = space();
    const subj = (rest: string) => subjectFor(h.prefix, `${sp}.${rest}`);
    const { received, sub } = await collect('wild', [subj('*.created'), subj('deep.>')]);
    const pub = (s: string) => h.transport.publish({ id: randomUUID(), subject: s, data: bytes(s), headers: {} });
    await pub(subj('image.created')); // yes: * is one token
    await pub(subj('image.x.created')); // no: * is exactly one token
    await pub(subj('deep')); // no: > needs at least one more token
    await pub(subj('deep.a.b')); // yes
    await pub(subj('image.deleted')); // no
    await pub(subj('end.created')); // yes, marker
    await waitFor(() => received.some((m) => m.subject === subj('end.created')));
    expect(received.map((m) => m.subject)).toEqual([subj('image.created'), subj('deep.a.b'), subj('end.created')]);
    await sub.stop();
  });
});
