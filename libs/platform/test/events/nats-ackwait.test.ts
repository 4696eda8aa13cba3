import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { type EventMessage, subjectFor } from '../../src/events/index.js';
import { natsTransportForSuite, until } from './nats-support.js';

describe('nats transport: slow handlers and ack wait', () => {
  const { tag, transport: suiteTransport } = natsTransportForSuite();

  it('keeps prefetched messages waiting behind a slow handler from being redelivered', { timeout: 60_000 }, async () => {
    const transport = suiteTransport();
    const subject = subjectFor(tag, 'slow.work');
    const ids = Array.from({ length: 6 }, () => randomUUID());
    for (const id of ids) await transport.publish({ id, subject, data: new Uint8Array([1]), headers: {} });
    const seen: EventMessage[] = [];
    // One handler at a time taking 400 ms with a 1 s ack wait: the 4th to 6th message of the pull
    // request wait 1.2 to 2 s before their handler starts.
    const sub = await transport.subscribe({
      durable: `${tag}-slow`,
      subjects: [subject],
      ackWaitMs: 1000,
      maxDeliver: 3,
      handler: async (m) => {
        seen.push(m);
        await new Promise((r) => setTimeout(r, 400));
      },
    });
    try {
      await until(() => new Set(seen.map((m) => m.id)).size === ids.length, 20_000, 'every message handled');
      await new Promise((r) => setTimeout(r, 1500)); // a redelivery would show up meanwhile
      expect(seen.map((m) => m.deliveryCount)).toEqual(ids.map(() => 1));
      expect(seen.map((m) => m.id).sort()).toEqual([...ids].sort());
    } finally {
      await sub.stop();
    }
  });
});
