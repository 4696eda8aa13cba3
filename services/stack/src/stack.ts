import { join } from 'node:path';
import {
  assertCanListen,
  type Config,
  createLogger,
  createSteps,
  type Logger,
  loadConfig,
  type RunningService,
  type ServiceContext,
  startModules,
} from '@imagegen/platform';
import { ensureDevelopmentChain } from './dev-credentials.js';
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
  /** The folder of the self-signed development Content Credentials chain, when the stack signs with it. */
  developmentCredentials?: string;
  saveSecrets(s: LocalSecrets): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts the chosen modules in dependency order on one shared context: the all-in-one's own steps (the data
 * folder's lock, the local secrets, the embedded PostgreSQL), then startModules (libs/platform), the same
 * steps a single service's process runs (runStandalone): telemetry, events, storage, the modules, readiness.
 * Every step is timed and logged; a failure stops what started, in reverse, and rethrows; stop() stops
 * everything in reverse. Every default is swapped by one environment variable: DATABASE_URL (else embedded
 * PostgreSQL), NATS_URL (else in-process events), S3_ENDPOINT (else files under $DATA_DIR/objects),
 * PROVA/PROVB_BASE_URL (else the sandbox provider).
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

  const steps = createSteps({ logger, level: 'info' });
  try {
    const { step } = steps;
    // The embedded PostgreSQL's folder is this instance's alone; a second instance on it is refused by name.
    if (!early.databaseUrl) {
      await step(
        'data folder lock',
        () => lockDataDir(early.dataDir),
        (lock) => lock.release(),
      );
    } else await step('database check', () => checkDatabase(early.databaseUrl as string));
    const { secrets, firstStart, save } = await step('local secrets', () => loadOrCreateSecrets(early.dataDir));
    env.ADMIN_TOKEN ||= secrets.adminToken;
    env.CREDENTIALS_KEY ||= secrets.credentialsKey;
    env.ADMIN_EMAIL ||= 'admin@localhost';
    env.ADMIN_PASSWORD ||= secrets.adminPassword;
    // Content Credentials (issue 39): started with no signing key, chain or C2PA_SIGNING=off, the all-in-one signs
    // with a self-signed development chain it makes on first start and keeps in $DATA_DIR/c2pa (and trusts its root).
    const cc = early.contentCredentials;
    let developmentCredentials: string | undefined;
    if (cc.enabled && !cc.signingKey && !cc.signingChain && planned.some((m) => m.name === 'library')) {
      const chain = await step('development content credentials', () => ensureDevelopmentChain(join(early.dataDir, 'c2pa')));
      env.C2PA_SIGNING_KEY = chain.keyFile;
      env.C2PA_SIGNING_CHAIN = chain.chainFile;
      env.C2PA_TRUST_ANCHORS ||= chain.rootFile;
      developmentCredentials = chain.dir;
    }
    const config = loadConfig(env);
    if (!config.databaseUrl) {
      const pg = await step(
        'embedded postgres',
        () => startEmbeddedPostgres(config.dataDir, logger),
        (pg) => pg.stop(),
      );
      config.databaseUrl = pg.url;
    }
    const needSandbox = !config.provABaseUrl || !config.provBBaseUrl;
    const chosen = planned.filter((def) => def.name !== 'sandbox-provider' || needSandbox);
    const started = await startModules(steps, {
      config,
      logger,
      processName: target === 'all' ? 'stack' : target,
      modules: chosen.map((def) => ({
        name: def.name,
        registersAs: def.registersAs,
        start: async (ctx) => (await def.load())(ctx),
        started: def.started,
      })),
    });
    const modules = started.modules as RunningStack['modules'];
    return {
      config,
      ctx: started.ctx,
      baseUrl: modules.find((m) => m.name === 'gateway')?.running.httpUrl,
      modules,
      secrets,
      firstStart,
      developmentCredentials,
      saveSecrets: save,
      stop: () => steps.stop(),
    };
  } catch (err) {
    await steps.stop();
    throw err;
  }
}
