import { randomBytes, randomUUID } from 'node:crypto';
import { ExecutionFinished, ImageDeleted, ImageStored } from '@imagegen/contracts/events/v1/events';
import {
  type Config,
  createEventTransport,
  createLogger,
  createResolver,
  createStorage,
  type EventTransport,
  loadConfig,
  type ServiceContext,
  subjectFor,
} from '@imagegen/platform';

export const MIB = 1024 * 1024;

export function testConfig(dbUrl: string, extra: Record<string, string> = {}): Config {
  return loadConfig({
    DATABASE_URL: dbUrl,
    NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
    EVENTS_PREFIX: `ut${randomBytes(5).toString('hex')}`,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    DB_POOL_MAX: '5',
    ...extra,
  } as NodeJS.ProcessEnv);
}

export async function testContext(config: Config, events?: EventTransport): Promise<ServiceContext> {
  const logger = createLogger('usage-test', config.logLevel);
  return {
    config,
    logger,
    events: events ?? (await createEventTransport(config, logger)),
    storage: createStorage({ dataDir: '/tmp/unused', publicBaseUrl: 'http://localhost' }),
    resolve: createResolver(config, {}),
  };
}

export function storedEvent(
  prefix: string,
  e: { tenantId: string; sizeBytes: number; occurredAt?: string; operation?: string; id?: string },
) {
  return {
    id: e.id ?? randomUUID(),
    subject: subjectFor(prefix, 'library.image_stored'),
    headers: {},
    data: ImageStored.encode(
      ImageStored.fromPartial({
        tenantId: e.tenantId,
        imageId: Math.floor(Math.random() * 1e9),
        sizeBytes: e.sizeBytes,
        thumbnailSizeBytes: 1000,
        modelId: 'provA-flash-lite-image',
        operation: e.operation ?? 'generate',
        sessionId: 's1',
        occurredAt: e.occurredAt ?? new Date().toISOString(),
        keyType: 'live',
      }),
    ).finish(),
  };
}

export function finishedEvent(
  prefix: string,
  e: { tenantId: string; durationMs: number; status?: string; occurredAt?: string; id?: string },
) {
  return {
    id: e.id ?? randomUUID(),
    subject: subjectFor(prefix, 'generation.execution_finished'),
    headers: {},
    data: ExecutionFinished.encode(
      ExecutionFinished.fromPartial({
        tenantId: e.tenantId,
        executionId: randomUUID(),
        sessionId: 's1',
        toolName: 'generate_image',
        status: e.status ?? 'completed',
        durationMs: e.durationMs,
        occurredAt: e.occurredAt ?? new Date().toISOString(),
        keyType: 'live',
        images: 1,
      }),
    ).finish(),
  };
}

export function deletedEvent(prefix: string, e: { tenantId: string; sizeBytes: number; storedAt?: string; id?: string }) {
  return {
    id: e.id ?? randomUUID(),
    subject: subjectFor(prefix, 'library.image_deleted'),
    headers: {},
    data: ImageDeleted.encode(
      ImageDeleted.fromPartial({
        tenantId: e.tenantId,
        imageId: 1,
        sizeBytes: e.sizeBytes,
        thumbnailSizeBytes: 1000,
        occurredAt: new Date().toISOString(),
        storedAt: e.storedAt ?? new Date().toISOString(),
      }),
    ).finish(),
  };
}
