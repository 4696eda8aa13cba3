export { consumeOnce, decodeOrSkip } from './consume.js';
export { createInProcessTransport, type InProcessTransportOptions } from './inprocess.js';
export { createNatsTransport, type NatsTransportOptions } from './nats.js';
export {
  DEFAULT_OUTBOX_MAX_ATTEMPTS,
  DIRECT_PUBLISH_GRACE_MS,
  type DirectEvent,
  type DirectPublisher,
  type OutboxEvent,
  type OutboxRelay,
  type OutboxRelayOptions,
  outboxChannel,
  outboxInsert,
  outboxInsertKeyed,
  type SqlFragment,
  startOutboxRelay,
  writeOutbox,
} from './outbox.js';
export { invalidPublishSubject, matchesAny, sanitizeDurable, subjectFor, subjectMatches } from './subjects.js';
export { onTenantChanged } from './tenant-changed.js';
export { extractContext, injectContext } from './trace.js';
export type {
  EventMessage,
  EventTransport,
  OutgoingEvent,
  PermanentPublishReason,
  RetryPolicy,
  SubscribeOptions,
  Subscription,
} from './types.js';
export { classifyPublishError, DEFAULT_RETRY, PermanentPublishError, retryDelay, TransientPublishError } from './types.js';
