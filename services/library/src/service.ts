import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LibraryServiceService } from '@imagegen/contracts/library/v1/library';
import {
  bind,
  createDb,
  dbReadiness,
  type GrpcServiceBinding,
  migrate,
  type RunningService,
  type ServiceContext,
  type StartService,
  startGrpcServer,
  startOutboxRelay,
} from '@imagegen/platform';
import { createAssets } from './assets/index.js';
import { libraryHandlers } from './grpc.js';
import { startExecutionOutcomes } from './images/outcomes.js';

const MIGRATIONS = join(dirname(fileURLToPath(import.meta.url)), '..', 'migrations');

/**
 * The library service: images, thumbnails and sessions (this folder), plus the saved assets
 * (characters, products, scenes, style presets, search presets) under src/assets, on one gRPC server,
 * one pool on schema `library`, one outbox relay.
 */
export const start: StartService = async (ctx: ServiceContext): Promise<RunningService> => {
  const logger = ctx.logger;
  if (!ctx.config.databaseUrl) throw new Error('library: DATABASE_URL is not configured');
  const sql = createDb(ctx.config.databaseUrl, { schema: 'library', max: ctx.config.dbPoolMax, applicationName: 'imagegen-library' });
  const stops: (() => Promise<void>)[] = [() => sql.end({ timeout: 5 })];
  const stopAll = async () => {
    for (const s of stops.reverse()) {
      try {
        await s();
      } catch (err) {
        logger.warn({ err }, 'library: error while stopping');
      }
    }
    stops.length = 0;
  };
  try {
    await migrate(sql, 'library', MIGRATIONS);
    // Saved assets (characters, products, scenes, style presets, search presets): src/assets, same server and pool.
    const assets = createAssets({ sql, ctx });
    stops.push(() => assets.stop());
    const relay = await startOutboxRelay({
      sql,
      schema: 'library',
      transport: ctx.events,
      logger,
      maxAttempts: ctx.config.outboxMaxAttempts,
    });
    stops.push(() => relay.stop());
    // The commits of pending images publish their ImageStored events themselves (relay.direct).
    const bindings: GrpcServiceBinding[] = [
      bind(LibraryServiceService, libraryHandlers({ sql, ctx, outbox: relay.direct })),
      assets.binding,
    ];
    // Pending images follow their execution's outcome; crashed stores and deletes leave no files behind.
    const outcomes = await startExecutionOutcomes({ sql, storage: ctx.storage, config: ctx.config, logger, events: ctx.events });
    stops.push(() => outcomes.stop());
    const dbReady = dbReadiness(sql);
    const server = await startGrpcServer({
      host: ctx.config.grpcHost,
      port: ctx.config.grpcPort,
      services: bindings,
      logger,
      ready: dbReady,
    });
    stops.push(() => server.stop(ctx.config.shutdownGraceMs));
    logger.info({ address: server.address }, 'library service started');
    return {
      grpcAddress: server.address,
      stop: stopAll,
      async ready() {
        try {
          return (await dbReady()) && (await ctx.storage.healthy());
        } catch {
          return false;
        }
      },
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
};
