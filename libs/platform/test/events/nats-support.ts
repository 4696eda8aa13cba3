import { randomUUID } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pino from 'pino';
import { afterAll, beforeAll } from 'vitest';
import { createNatsTransport, type EventTransport } from '../../src/events/index.js';

export const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

/**
 * A NATS transport on a stream of its own for the enclosing describe block (created in beforeAll, the
 * stream deleted in afterAll); `tag` is its subject prefix, `streamName` its JetStream stream.
 */
export function natsTransportForSuite(): { tag: string; streamName: string; transport: () => EventTransport } {
  const tag = `t${randomUUID().replace(/-/g, '').slice(0, 10)}`;
  const streamName = `TEST_${tag}`;
  let transport: EventTransport | undefined;
  beforeAll(async () => {
    transport = await createNatsTransport({ url: NATS_URL, streamName, subjectPrefix: tag, logger: pino({ level: 'silent' }) });
  });
  afterAll(async () => {
    await transport?.close();
    const nc = await connect({ servers: NATS_URL });
    await (await jetstreamManager(nc)).streams.delete(streamName).catch(() => {});
    await nc.close();
  });
  return {
    tag,
    streamName,
    transport: () => {
      if (!transport) throw new Error('the NATS transport is not started yet');
      return transport;
    },
  };
}
