export { consumeOnce, decodeOrSkip } from './consume.js';
export { createInProcessTransport, type InProcessTransportOptions } from './inprocess.js';
export { createNatsTransport, type NatsTransportOptions } from './nats.js';
export {
  type OutboxEvent,
  type OutboxRelay,
  type OutboxRelayOptions,
  outboxChannel,
  startOutboxRelay,
  writeOutbox,
} from './outbox.js';
export { matchesAny, sanitizeDurable, subjectFor, subjectMatches } from './subjects.js';
export { extractContext, injectContext } from './trace.js';
export type { EventMessage, EventTransport, OutgoingEvent, RetryPolicy, SubscribeOptions, Subscription } from './types.js';
export { DEFAULT_RETRY, retryDelay } from './types.js';
