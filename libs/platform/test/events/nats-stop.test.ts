import { randomUUID } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../../../../test/support/wait.js';
import { subjectFor } from '../../src/events/index.js';
import { NATS_URL, natsTransportForSuite } from './nats-support.js';

/** Far longer than the test may run: a message that is only redelivered after ack wait fails the test. */
const ACK_WAIT_MS = 10 * 60_000;

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);

describe('nats transport: stopping a durable subscription', () => {
  const { tag, streamName, transport: suiteTransport } = natsTransportForSuite();

  it('hands prefetched, unhandled messages back so a restarted consumer gets them at once', { timeout: 120_000 }, async () => {
    const transport = suiteTransport();
    const subject = subjectFor(tag, 'stop.queued');
    const durable = 'queued';
    const total = 20;
    for (let i = 1; i <= total; i++) await transport.publish({ id: randomUUID(), subject, data: bytes(String(i)), headers: {} });

    // The first handler call blocks, so the transport holds further messages it pulled but did not handle.
    const first: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const sub = await transport.subscribe({
      durable,
      subjects: [subject],
      ackWaitMs: ACK_WAIT_MS,
      handler: async (m) => {
        first.push(text(m.data));
        await gate;
      },
    });
    const nc = await connect({ servers: NATS_URL });
    try {
      const jsm = await jetstreamManager(nc);
      // Delivered to this process and not acked: the one being handled plus the prefetched ones.
      await waitFor(async () => (await jsm.consumers.info(streamName, durable)).num_ack_pending > 1, {
        timeout: 30_000,
        message: 'prefetched messages',
      });
      const stopping = sub.stop();
      release();
      await stopping;
      expect(first).toEqual(['1']);

      const second: string[] = [];
      const again = await transport.subscribe({
        durable,
        subjects: [subject],
        ackWaitMs: ACK_WAIT_MS,
        handler: async (m) => void second.push(text(m.data)),
      });
      // Everything not handled before the stop arrives now, not after the ack wait.
      await waitFor(() => second.length >= total - 1, {
        timeout: 60_000,
        message: 'the messages the stopped subscription did not handle',
      });
      await again.stop();
      expect([...second].sort((a, b) => Number(a) - Number(b))).toEqual(Array.from({ length: total - 1 }, (_, i) => String(i + 2)));
      expect((await jsm.consumers.info(streamName, durable)).num_ack_pending).toBe(0);
    } finally {
      await nc.close();
    }
  });
});
