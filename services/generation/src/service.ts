import { fileURLToPath } from 'node:url';
import { GenerationServiceService } from '@imagegen/contracts/generation/v1/generation';
import {
  type BreakerState,
  bind,
  createDb,
  migrate,
  type ServiceContext,
  type StartService,
  setBreakerState,
  startGrpcServer,
  startOutboxRelay,
} from '@imagegen/platform';
import { createAssetsComposer } from './assets-composer.js';
import type { Composer } from './compose.js';
import { type Collaborators, grpcCollaborators } from './deps.js';
import { generationHandlers } from './grpc.js';
import { GenerationPipeline, type PipelineDeps } from './pipeline.js';
import { CircuitBreaker } from './providers/breaker.js';
import { ProviderClient } from './providers/client.js';
import { ProvAAdapter } from './providers/prova.js';
import { ProvBAdapter } from './providers/provb.js';
import { type GenerationSettings, loadSettings } from './settings.js';
import { failStaleExecutions } from './store.js';

/**
 * generation: POST /api/images, edits, uploads for editing, executions. Owns schema `generation`
 * (executions, execution_logs, outbox). Provider adapters (provA generateContent, provB images API)
 * with per-tenant key rotation and failover, one circuit breaker per provider, per-provider timeouts.
 * See docs/design/generation.md.
 */
export interface GenerationOptions {
  settings?: Partial<GenerationSettings>;
  /** Service tests: fakes instead of the gRPC clients of tenancy, library and usage. */
  collaborators?: Collaborators;
  /** The saved-assets composer (default: the library's AssetsService over gRPC). */
  composer?: Composer;
}

const MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));

export async function startGeneration(ctx: ServiceContext, opts: GenerationOptions = {}) {
  const logger = ctx.logger;
  const settings = loadSettings(ctx.config, opts.settings);
  const sql = createDb(ctx.config.databaseUrl as string, { schema: 'generation', max: ctx.config.dbPoolMax });
  await migrate(sql, 'generation', MIGRATIONS);

  const onChange = (from: string, to: string, info: { provider: string; failures: number }) => {
    const line = { provider: info.provider, from, to, consecutiveFailures: info.failures };
    if (to === 'open') logger.warn(line, `circuit breaker ${info.provider}: ${from} -> ${to}`);
    else logger.info(line, `circuit breaker ${info.provider}: ${from} -> ${to}`);
    setBreakerState(info.provider, to as BreakerState);
  };
  const breakerOpts = { failureThreshold: settings.breakerFailureThreshold, resetTimeoutMs: settings.breakerResetTimeoutMs, onChange };
  const breakers = { provA: new CircuitBreaker('provA', breakerOpts), provB: new CircuitBreaker('provB', breakerOpts) };
  setBreakerState('provA', 'closed');
  setBreakerState('provB', 'closed');
  // Base URLs are read per call: in the all-in-one shape the sandbox's URL is filled in at start-up.
  const baseUrl = (name: 'provABaseUrl' | 'provBBaseUrl') => () => {
    const u = ctx.config[name];
    if (!u) throw new Error(`${name === 'provABaseUrl' ? 'PROVA_BASE_URL' : 'PROVB_BASE_URL'} is not configured`);
    return u;
  };
  const providers = {
    provA: new ProviderClient({
      adapter: new ProvAAdapter(baseUrl('provABaseUrl')),
      breaker: breakers.provA,
      timeoutMs: settings.provATimeoutMs,
    }),
    provB: new ProviderClient({
      adapter: new ProvBAdapter(baseUrl('provBBaseUrl')),
      breaker: breakers.provB,
      timeoutMs: settings.provBTimeoutMs,
    }),
  };
  const collaborators = opts.collaborators ?? grpcCollaborators(ctx);
  const deps: PipelineDeps = {
    sql,
    config: ctx.config,
    logger,
    settings,
    collaborators,
    providers,
    composer: opts.composer ?? createAssetsComposer(ctx),
  };
  const pipeline = new GenerationPipeline(deps);

  const grpc = await startGrpcServer({
    host: ctx.config.grpcHost,
    port: ctx.config.grpcPort,
    services: [bind(GenerationServiceService, generationHandlers(deps, pipeline, [breakers.provA, breakers.provB]))],
    logger,
  });
  const relay = await startOutboxRelay({
    sql,
    schema: 'generation',
    transport: ctx.events,
    logger,
    maxAttempts: ctx.config.outboxMaxAttempts,
  });

  const sweep = async () => {
    try {
      const n = await failStaleExecutions(sql, settings.staleExecutionMs, ctx.config.eventsPrefix);
      if (n > 0) logger.warn({ count: n }, 'marked abandoned executions failed');
    } catch (err) {
      logger.warn({ err }, 'stale execution sweep failed');
    }
  };
  void sweep();
  const sweeper = setInterval(sweep, 60_000);
  sweeper.unref();

  return {
    grpcAddress: grpc.address,
    deps,
    pipeline,
    breakers,
    async ready() {
      try {
        await sql`SELECT 1`;
        return true;
      } catch {
        return false;
      }
    },
    async stop() {
      clearInterval(sweeper);
      await relay.stop();
      await grpc.stop(ctx.config.shutdownGraceMs);
      collaborators.close();
      await sql.end({ timeout: 5 });
    },
  };
}

export const start: StartService = async (ctx) => {
  const g = await startGeneration(ctx);
  return { grpcAddress: g.grpcAddress, stop: g.stop, ready: g.ready };
};
