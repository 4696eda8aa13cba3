import type { Logger } from 'pino';
import type { Config } from './config.js';
import { createInProcessTransport, createNatsTransport, type EventTransport } from './events/index.js';

/** JetStream when NATS_URL is set, else the in-process transport of the all-in-one shape. */
export async function createEventTransport(config: Pick<Config, 'natsUrl' | 'eventsPrefix'>, logger: Logger): Promise<EventTransport> {
  if (!config.natsUrl) return createInProcessTransport({ logger });
  return createNatsTransport({
    url: config.natsUrl,
    streamName: `${config.eventsPrefix.replace(/[^A-Za-z0-9_-]/g, '_').toUpperCase()}_EVENTS`,
    subjectPrefix: config.eventsPrefix,
    logger,
  });
}
