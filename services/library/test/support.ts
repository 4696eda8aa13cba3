import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LibraryServiceService, StoreImageRequest } from '@imagegen/contracts/library/v1/library';
import {
  createClient,
  createDb,
  createFsStorage,
  createInProcessTransport,
  createLogger,
  createTestDatabase,
  type EventMessage,
  loadConfig,
  type Principal,
  type RunningService,
  type ServiceContext,
  type Sql,
} from '@imagegen/platform';
import sharp from 'sharp';
import { start } from '../src/service.js';

export interface LibraryHarness {
  ctx: ServiceContext;
  running: RunningService;
  client: ReturnType<typeof createClient<typeof LibraryServiceService>>;
  /** A pool on schema library for direct assertions. */
  sql: Sql;
  events: EventMessage[];
  dataDir: string;
  principal(tenantId: string): Principal;
  stop(): Promise<void>;
}

/** The library service alone on a fresh database, files in a temp dir, in-process events recorded in `events`. */
export async function startLibrary(env: Record<string, string> = {}): Promise<LibraryHarness> {
  const db = await createTestDatabase(undefined, 'lib');
  const dataDir = mkdtempSync(join(tmpdir(), 'imagegen-lib-'));
  const config = loadConfig({
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    PUBLIC_BASE_URL: 'http://files.test',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    EVENTS_PREFIX: `lib${randomUUID().slice(0, 8)}`,
    DB_POOL_MAX: '4',
    ...env,
  });
  const logger = createLogger('library-test', config.logLevel);
  const events = createInProcessTransport({ logger });
  const storage = createFsStorage({ dir: join(dataDir, 'objects'), publicBaseUrl: config.publicBaseUrl });
  const ctx: ServiceContext = {
    config,
    logger,
    events,
    storage,
    resolve: () => {
      throw new Error('no other services in library tests');
    },
  };
  const seen: EventMessage[] = [];
  const sub = await events.subscribe({
    durable: 'test-recorder',
    subjects: [`${config.eventsPrefix}.>`],
    handler: async (m) => {
      seen.push(m);
    },
  });
  const running = await start(ctx);
  const client = createClient(LibraryServiceService, running.grpcAddress as string);
  const sql = createDb(db.url, { schema: 'library', max: 2 });
  return {
    ctx,
    running,
    client,
    sql,
    events: seen,
    dataDir,
    principal: (tenantId) => ({ requestId: randomUUID(), tenantId, keyType: 'live', source: 'test' }),
    async stop() {
      client.close();
      await sub.stop();
      await running.stop();
      await sql.end();
      await events.close();
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A StoreImage request: a generated PNG with prompt 'p', a live key, no links; the rest proto defaults, then `over`. */
export const storeRequest = (over: Partial<StoreImageRequest>): StoreImageRequest =>
  StoreImageRequest.fromPartial({ mimeType: 'image/png', prompt: 'p', operation: 'generate', keyType: 'live', ...over });

/** A solid-colour image made with sharp. */
export async function makeImage(
  width: number,
  height: number,
  opts: { format?: 'png' | 'jpeg' | 'webp'; color?: string; orientation?: number } = {},
): Promise<Buffer> {
  let img = sharp({ create: { width, height, channels: 3, background: opts.color ?? '#3366cc' } });
  const format = opts.format ?? 'png';
  img = format === 'jpeg' ? img.jpeg() : format === 'webp' ? img.webp() : img.png();
  if (opts.orientation) img = img.withMetadata({ orientation: opts.orientation });
  return img.toBuffer();
}
