import {
  assertCanListen,
  type Config,
  configureGrpcClients,
  createEventTransport,
  createLogger,
  createResolver,
  createStorage,
  type Logger,
  lifecycle,
  loadConfig,
  type RunningService,
  type ServiceContext,
  type ServiceName,
  setMetricsService,
  startTelemetry,
} from '@imagegen/platform';
import { startEmbeddedPostgres } from './embedded-postgres.js';
import { type ModuleName, resolveTargets } from './modules.js';
import { type LocalSecrets, loadOrCreateSecrets } from './secrets.js';
import { checkDatabase, lockDataDir } from './startup.js';

export interface StackOptions {
  env?: NodeJS.ProcessEnv;
  /** `all` (default), a module name or a comma list; overrides TARGET. */
  target?: string;
  logger?: Logger;
}

export interface RunningStack {
  config: Config;
  ctx: ServiceContext;
  baseUrl?: string;
  modules: { name: ModuleName; running: RunningService }[];
  secrets: LocalSecrets;
  firstStart: boolean;
  saveSecrets(s: LocalSecrets): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts the chosen modules in dependency order on one shared context. Every default is swapped by one
 * environment variable: DATABASE_URL (else embedded PostgreSQL), NATS_URL (else in-process events),
 * S3_ENDPOINT (else files under $DATA_DIR/objects), PROVA/PROVB_BASE_URL (else the sandbox provider).
 */
export async function startStack(opts: StackOptions = {}): Promise<RunningStack> {
  const env = { ...(opts.env ?? process.env) };
  // The all-in-one prints admin credentials: it listens on loopback unless HOST says otherwise (HOST=0.0.0.0
  // opts in). The standalone services keep loadConfig's 0.0.0.0 (a pod must listen on all interfaces).
  if (!env.HOST?.trim()) env.HOST = '127.0.0.1';
  const target = opts.target ?? env.TARGET ?? 'all';
  // Settings and the target first (ConfigError: one line naming the setting), before anything is touched.
  const early = loadConfig(env);
  const planned = resolveTargets(target, target === 'all');
  const logger = opts.logger ?? createLogger('stack', early.logLevel);
  // A taken gateway port is found now, not after every other module has started.
  if (planned.some((m) => m.name === 'gateway')) await assertCanListen(early.host, early.port, 'PORT');
  // The embedded PostgreSQL's folder is this instance's alone; a second instance on it is refused by name.
  const lock = early.databaseUrl ? undefined : await lockDataDir(early.dataDir);
  if (early.databaseUrl) await checkDatabase(early.databaseUrl);
  let secretsLoaded: Awaited<ReturnType<typeof loadOrCreateSecrets>>;
  try {
    secretsLoaded = await loadOrCreateSecrets(early.dataDir);
  } catch (err) {
    await lock?.release();
    throw err;
  }
  const { secrets, firstStart, save } = secretsLoaded;
  env.ADMIN_TOKEN ||= secrets.adminToken;
  env.CREDENTIALS_KEY ||= secrets.credentialsKey;
  env.ADMIN_EMAIL ||= 'admin@localhost';
  env.ADMIN_PASSWORD ||= secrets.adminPassword;
  const config = loadConfig(env);
  configureGrpcClients({ deadlineMs: config.grpcDeadlineMs, inProcess: config.grpcInProcess });

  const cleanups: (() => Promise<void>)[] = [];
  if (lock) cleanups.push(() => lock.release());
  const stopAll = async () => {
    // Readiness turns false first so load balancers stop sending work while modules drain.
    lifecycle.stopping = true;
    for (const c of cleanups.reverse()) {
      try {
        await c();
      } catch (err) {
        logger.warn({ err }, 'error while stopping');
      }
    }
    cleanups.length = 0;
  };

  try {
    setMetricsService(target === 'all' ? 'stack' : target);
    const telemetry = await startTelemetry(config, `imagegen-${target === 'all' ? 'stack' : target}`);
    cleanups.push(() => telemetry.stop());
    if (!config.databaseUrl) {
      const pg = await startEmbeddedPostgres(config.dataDir, logger);
      config.databaseUrl = pg.url;
      cleanups.push(() => pg.stop());
    }
    const events = await createEventTransport(config, logger);
    cleanups.push(() => events.close());
    const storage = createStorage({
      s3Endpoint: config.s3?.endPoint,
      s3AccessKey: config.s3?.accessKey,
      s3SecretKey: config.s3?.secretKey,
      s3Bucket: config.s3?.bucket,
      s3PublicUrl: config.s3?.publicUrl,
      dataDir: config.dataDir,
      publicBaseUrl: config.publicBaseUrl,
    });
    const known: Partial<Record<ServiceName, string>> = {};
    const ctx: ServiceContext = { config, logger, events, storage, resolve: createResolver(config, known) };

    const needSandbox = !config.provABaseUrl || !config.provBBaseUrl;
    const modules: RunningStack['modules'] = [];
    for (const def of planned) {
      if (def.name === 'sandbox-provider' && !needSandbox) continue;
      const start = await def.load();
      const running = await start({ ...ctx, logger: logger.child({ module: def.name }) });
      modules.push({ name: def.name, running });
      cleanups.push(() => running.stop());
      if (def.registersAs) known[def.registersAs] = running.grpcAddress ?? running.httpUrl;
      if (def.name === 'sandbox-provider' && running.httpUrl) {
        // The sandbox speaks both upstream protocols under these prefixes.
        config.provABaseUrl ??= `${running.httpUrl}/provA`;
        config.provBBaseUrl ??= `${running.httpUrl}/provB`;
      }
      logger.debug({ module: def.name, address: running.grpcAddress ?? running.httpUrl }, 'module started');
    }
    const gateway = modules.find((m) => m.name === 'gateway');
    return {
      config,
      ctx,
      baseUrl: gateway?.running.httpUrl,
      modules,
      secrets,
      firstStart,
      saveSecrets: save,
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
