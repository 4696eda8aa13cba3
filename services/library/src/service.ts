import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LibraryServiceService } from '@imagegen/contracts/library/v1/library';
import {
  bind,
  databaseSteps,
  dbReadiness,
  type GrpcServiceBinding,
  type RunningService,
  type ServiceContext,
  type StartService,
  startGrpcServer,
  startOutboxRelay,
  startSteps,
} from '@imagegen/platform';
import { createAssets } from './assets/index.js';
import { createContentCredentials } from './credentials/c2pa.js';
import { libraryHandlers } from './grpc.js';
import { startExecutionOutcomes } from './images/outcomes.js';
import { libraryTenantData } from './tenant-data.js';

const MIGRATIONS = join(dirname(fileURLToPath(import.meta.url)), '..', 'migrations');

/**
 * The library service: images, thumbnails and sessions (this folder), plus the saved assets
 * (characters, products, scenes, style presets, search presets) under src/assets, on one gRPC server,
 * one pool on schema `library`, one outbox relay.
 */
export const start: StartService = (ctx: ServiceContext): Promise<RunningService> =>
  startSteps({ logger: ctx.logger }, async (step) => {
    const logger = ctx.logger;
    const { config } = ctx;
    const sql = await databaseSteps(step, ctx.config, {
      service: 'library',
      schema: 'library',
      migrations: MIGRATIONS,
      applicationName: 'imagegen-library',
    });
    // Content Credentials: signs provider output in storeImage (C2PA_SIGNING*, src/credentials).
    const credentials = await step('content credentials', () => createContentCredentials(config, logger));
    // Saved assets (characters, products, scenes, style presets, search presets): src/assets, same server and pool.
    const assets = await step(
      'assets',
      () => createAssets({ sql, ctx, credentials }),
      (a) => a.stop(),
    );
    const relay = await step(
      'outbox relay',
      () => startOutboxRelay({ sql, schema: 'library', transport: ctx.events, logger, maxAttempts: config.outboxMaxAttempts }),
      (r) => r.stop(),
    );
    // The commits of pending images publish their ImageStored events themselves (relay.direct).
    const bindings: GrpcServiceBinding[] = [
      bind(LibraryServiceService, libraryHandlers({ sql, ctx, outbox: relay.direct, credentials })),
      assets.binding,
      libraryTenantData(sql, ctx.storage),
    ];
    // Pending images follow their execution's outcome; crashed stores and deletes leave no files behind.
    await step(
      'execution outcomes',
      () => startExecutionOutcomes({ sql, storage: ctx.storage, config, logger, events: ctx.events }),
      (o) => o.stop(),
    );
    const dbReady = dbReadiness(sql);
    const server = await step(
      'grpc server',
      () => startGrpcServer({ host: config.grpcHost, port: config.grpcPort, services: bindings, logger, ready: dbReady }),
      (s) => s.stop(config.shutdownGraceMs),
    );
    logger.info({ address: server.address }, 'library service started');
    return {
      grpcAddress: server.address,
      async ready() {
        try {
          return (await dbReady()) && (await ctx.storage.healthy());
        } catch {
          return false;
        }
      },
    };
  });
