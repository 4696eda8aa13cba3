import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { GenerationServiceService } from '@imagegen/contracts/generation/v1/generation';
import {
  type BreakerState,
  bind,
  databaseSteps,
  dbReadiness,
  durationFromEnv,
  onTenantChanged,
  type ServiceContext,
  type StartService,
  setBreakerState,
  startGrpcServer,
  startOutboxRelay,
  startSteps,
} from '@imagegen/platform';
import { createAssetsComposer } from './assets-composer.js';
import type { Composer } from './compose.js';
import { type Collaborators, grpcCollaborators, withTenantCache } from './deps.js';
import { drainPendingFailures } from './executions.js';
import { generationHandlers } from './grpc.js';
import { type CancelRegistry, cancelRegistry } from './jobs/cancels.js';
import { JobRunner } from './jobs/runner.js';
import type { Provider } from './models.js';
import { GenerationPipeline, type PipelineDeps } from './pipeline.js';
import { type BreakerInfo, CircuitBreaker } from './providers/breaker.js';
import { ProviderClient } from './providers/client.js';
import { ProvAAdapter } from './providers/prova.js';
import { ProvBAdapter } from './providers/provb.js';
import { withQuotaFallback } from './quota-fallback.js';
import { type GenerationSettings, loadSettings } from './settings.js';
import { failOrphanedExecutions, heartbeat, removeInstance } from './store.js';
import { generationTenantData } from './tenant-data.js';

/** Generation's (per-process) consumer of TenantChanged, which drops the tenant from its cache. */
export const TENANT_CHANGED_DURABLE = 'generation-tenant-changed';

/** Liveness: each process moves its heartbeat this often ... */
export const HEARTBEAT_MS = durationFromEnv('EXECUTION_HEARTBEAT_MS', 5_000);
/** ... and its running executions are failed by any replica once it missed this many milliseconds of them. */
export const DEAD_AFTER_MS = durationFromEnv('EXECUTION_DEAD_AFTER_MS', 30_000);
/** How often every replica looks for executions of dead processes. */
export const REAPER_MS = durationFromEnv('EXECUTION_REAPER_MS', 10_000);

/**
 * generation: POST /api/images, edits, uploads for editing, executions. Owns schema `generation`
 * (executions, execution_logs, outbox). Provider adapters (provA generateContent, provB images API)
 * with per-tenant key rotation and failover, a circuit breaker per provider credential, per-provider timeouts.
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
  return startSteps({ logger }, async (step) => {
    const sql = await databaseSteps(step, ctx.config, { service: 'generation', schema: 'generation', migrations: MIGRATIONS });

    // One circuit per credential (tenant + key): each change is logged with the credential; the metric shows
    // the provider's worst circuit.
    const onChange = (from: string, to: string, info: BreakerInfo) => {
      const line = { provider: info.provider, credential: info.credential, from, to, consecutiveFailures: info.failures };
      if (to === 'open') logger.warn(line, `circuit breaker ${info.provider} (${info.credential}): ${from} -> ${to}`);
      else logger.info(line, `circuit breaker ${info.provider} (${info.credential}): ${from} -> ${to}`);
      const breaker = breakers[info.provider as keyof typeof breakers];
      setBreakerState(info.provider, (breaker?.current ?? to) as BreakerState);
    };
    const breakerOpts = { failureThreshold: settings.breakerFailureThreshold, resetTimeoutMs: settings.breakerResetTimeoutMs, onChange };
    const breakers: Record<Provider, CircuitBreaker> = {
      provA: new CircuitBreaker('provA', breakerOpts),
      provB: new CircuitBreaker('provB', breakerOpts),
    };
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
    const tenantCache = opts.collaborators ? undefined : withTenantCache(grpcCollaborators(ctx), ctx.config.apiKeyCacheTtlMs);
    const collaborators = await step(
      'service clients',
      () => (tenantCache ? withQuotaFallback(tenantCache, { logger }) : (opts.collaborators as Collaborators)),
      (c) => c.close(),
    );
    // Liveness: this process's row, moved every HEARTBEAT_MS until it stopped (after the gRPC server drained:
    // another replica's reaper would otherwise fail this process's running executions while they finish).
    const instanceId = randomUUID();
    await step(
      'liveness row',
      () => heartbeat(sql, instanceId),
      () => removeInstance(sql, instanceId).catch((err) => logger.warn({ err }, 'could not remove the liveness row')),
    );
    await step(
      'heartbeat',
      () => {
        const timer = setInterval(() => heartbeat(sql, instanceId).catch((err) => logger.debug({ err }, 'heartbeat failed')), HEARTBEAT_MS);
        timer.unref();
        return timer;
      },
      (timer) => clearInterval(timer),
    );
    const relay = await step(
      'outbox relay',
      () => startOutboxRelay({ sql, schema: 'generation', transport: ctx.events, logger, maxAttempts: ctx.config.outboxMaxAttempts }),
      (r) => r.stop(),
    );
    const deps: PipelineDeps = {
      sql,
      // Executions publish their ExecutionFinished themselves, right after it committed (relay.direct).
      outbox: relay.direct,
      config: ctx.config,
      logger,
      settings,
      collaborators,
      providers,
      composer: opts.composer ?? createAssetsComposer(ctx),
      instanceId,
      cancels: cancelRegistry(),
    };
    const pipeline = new GenerationPipeline(deps);
    // Stopped after the gRPC server: the failed states its last calls left are written before the pool closes.
    await step(
      'pending failure writes',
      () => undefined,
      () => drainPendingFailures(5000),
    );
    // A tenant updated, deactivated or with a key revoked: this process drops what it cached of it at once.
    if (tenantCache) {
      await step(
        'tenant-changed consumer',
        () =>
          onTenantChanged(ctx.events, { eventsPrefix: ctx.config.eventsPrefix, durable: TENANT_CHANGED_DURABLE, logger }, (id) =>
            tenantCache.invalidate(id),
          ),
        (c) => c.stop(),
      );
    }
    const dbReady = dbReadiness(sql);
    const jobs = new JobRunner({
      sql,
      instanceId,
      logger,
      cancels: deps.cancels as CancelRegistry,
      run: (job, signal) => pipeline.runJob(job, signal),
      workers: ctx.config.generation.jobWorkers,
      runningPerTenant: ctx.config.generation.jobsRunningPerTenant,
      pollMs: ctx.config.generation.jobPollMs,
    });
    const grpc = await step(
      'grpc server',
      () =>
        startGrpcServer({
          host: ctx.config.grpcHost,
          port: ctx.config.grpcPort,
          services: [
            bind(
              GenerationServiceService,
              generationHandlers(deps, pipeline, [breakers.provA, breakers.provB], () => jobs.wake()),
            ),
            generationTenantData(sql),
          ],
          logger,
          ready: dbReady,
        }),
      (g) => g.stop(ctx.config.shutdownGraceMs),
    );

    // Queued jobs: claimed here while this process has room (stopped first: its running jobs finish or are left
    // to the orphan reaper).
    await step(
      'job runner',
      () => jobs.start(),
      () => jobs.stop(ctx.config.shutdownGraceMs),
    );

    // The orphan reaper: an execution whose process died is failed within about DEAD_AFTER_MS + REAPER_MS,
    // by whichever replica looks first (finishing is idempotent).
    let reaping: Promise<void> | undefined;
    const reap = () => {
      reaping ??= failOrphanedExecutions(sql, {
        deadAfterMs: DEAD_AFTER_MS,
        staleMs: settings.staleExecutionMs,
        eventsPrefix: ctx.config.eventsPrefix,
      })
        .then(
          (n) => {
            if (n > 0) logger.warn({ count: n }, 'marked executions of stopped processes failed');
          },
          (err) => logger.warn({ err }, 'orphaned execution sweep failed'),
        )
        .finally(() => {
          reaping = undefined;
        });
      return reaping;
    };
    await step(
      'orphan reaper',
      () => {
        void reap();
        const timer = setInterval(reap, REAPER_MS);
        timer.unref();
        return timer;
      },
      async (timer) => {
        clearInterval(timer);
        await reaping;
      },
    );

    return { grpcAddress: grpc.address, deps, pipeline, breakers, ready: dbReady };
  });
}

export const start: StartService = async (ctx) => {
  const g = await startGeneration(ctx);
  return { grpcAddress: g.grpcAddress, stop: g.stop, ready: g.ready };
};
