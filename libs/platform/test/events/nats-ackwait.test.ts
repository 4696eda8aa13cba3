import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../../../../test/support/wait.js';
import { type EventMessage, subjectFor } from '../../src/events/index.js';
import { natsTransportForSuite } from './nats-support.js';

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
      await waitFor(() => new Set(seen.map((m) => m.id)).size === ids.length, { timeout: 20_000, message: 'every message handled' });
      // A redelivery (ack wait run out while waiting behind the slow handler) would be due by now, and the
      // server hands out redeliveries before new messages: one published now is handled after any of them.
      const marker = randomUUID();
      await transport.publish({ id: marker, subject, data: new Uint8Array([2]), headers: {} });
      await waitFor(() => seen.some((m) => m.id === marker), { timeout: 20_000, message: 'the message published afterwards' });
      expect(seen.map((m) => m.deliveryCount)).toEqual([...ids, marker].map(() => 1));
      expect(seen.map((m) => m.id).sort()).toEqual([...ids, marker].sort());
    } finally {
      await sub.stop();
    }
  });
});
