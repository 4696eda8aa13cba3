import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TenancyServiceService } from '@imagegen/contracts/tenancy/v1/tenancy';
import {
  createClient,
  createDb,
  createInProcessTransport,
  createLogger,
  createStorage,
  createTestDatabase,
  type EventMessage,
  type EventTransport,
  loadConfig,
  type RunningService,
  type ServiceContext,
  type Sql,
} from '@imagegen/platform';
import { start } from '../src/service.js';

export interface TenancyHarness {
  db: { url: string; drop: () => Promise<void> };
  events: EventTransport;
  running: RunningService;
  client: ReturnType<typeof createClient<typeof TenancyServiceService>>;
  /** The tenancy schema, for reading rows the API does not show. */
  sql: Sql;
  /** A service context on the same database, events and files with `env` (to start another instance). */
  context(env: Record<string, string>): ServiceContext;
  stop(): Promise<void>;
}

/**
 * The tenancy service on a fresh database with the in-process event transport: started with `env`, and, when
 * `received` is given, every event of its `eventsPrefix` collected there.
 */
export async function startTenancyHarness(opts: {
  eventsPrefix: string;
  env: Record<string, string>;
  received?: EventMessage[];
}): Promise<TenancyHarness> {
  const logger = createLogger('tenancy-test', 'silent');
  const db = await createTestDatabase(undefined, 'tenancy');
  const dataDir = mkdtempSync(join(tmpdir(), 'tenancy-test-'));
  const events = createInProcessTransport({ logger });
  const received = opts.received;
  if (received) {
    await events.subscribe({
      durable: 'test',
      subjects: [`${opts.eventsPrefix}.tenancy.>`],
      handler: async (m) => {
        received.push(m);
      },
    });
  }
  const context = (env: Record<string, string>): ServiceContext => ({
    config: loadConfig({ DATABASE_URL: db.url, DATA_DIR: dataDir, EVENTS_PREFIX: opts.eventsPrefix, ...env }),
    logger,
    events,
    storage: createStorage({ dataDir, publicBaseUrl: 'http://localhost' }),
    resolve: () => {
      throw new Error('not needed');
    },
  });
  const running = await start(context(opts.env));
  const client = createClient(TenancyServiceService, running.grpcAddress as string);
  const sql = createDb(db.url, { schema: 'tenancy', max: 2 });
  return {
    db,
    events,
    running,
    client,
    sql,
    context,
    async stop() {
      client.close();
      await sql.end();
      await running.stop();
      await events.close();
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
