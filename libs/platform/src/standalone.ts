import { createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createTcpServer } from 'node:net';
import type { Logger } from 'pino';
import { buildInfo } from './build-info.js';
import { type Config, ConfigError, loadConfig, type ServiceName, StartupError } from './config.js';
import { configureGrpcClients } from './grpc.js';
import { createSteps, lifecycle, type Step, type Steps, StoppedWhileStarting } from './lifecycle.js';
import { createLogger } from './logger.js';
import { metricsText, setMetricsService, setReadyGauge, withTimeout } from './metrics.js';
import { createEventTransport } from './runtime.js';
import { createResolver, type RunningService, type ServiceContext, type StartService } from './service.js';
import { createStorage } from './storage/index.js';
import { startTelemetry, type Telemetry, telemetryRunning } from './telemetry.js';

/** A module a process runs: a service's start, and the address-book name the other modules reach it by. */
export interface ProcessModule {
  name: string;
  /** Address-book name it registers under (its gRPC address, else its HTTP URL) as soon as it started. */
  registersAs?: ServiceName;
  start: StartService;
  /** Called once it started, before the next module starts (the sandbox provider fills PROVA/PROVB_BASE_URL). */
  started?(running: RunningService, config: Config): void;
}

export interface StartModulesOptions {
  config: Config;
  logger: Logger;
  /** The `service` label of every metric and the traces' service name (`imagegen-<processName>`): 'stack' or the module. */
  processName: string;
  modules: ProcessModule[];
  /** Each module's logger (default: `logger.child({ module })`). */
  moduleLogger?: (name: string) => Logger;
  /** Steps after the modules and before `readiness` (runStandalone: its ops server on HTTP_PORT). */
  afterModules?: (step: Step, modules: StartedModules['modules']) => Promise<void>;
}

export interface StartedModules {
  ctx: ServiceContext;
  telemetry: Telemetry;
  modules: { name: string; running: RunningService }[];
}

/**
 * The start of every process, the all-in-one (services/stack's startStack, the modules of the module graph
 * chosen by TARGET) and one service alone (runStandalone, one module): the same steps, added to `steps`
 * after the caller's own (the all-in-one's data folder lock and embedded PostgreSQL; runStandalone's ops server):
 *
 * - `telemetry` (OpenTelemetry when OTEL_EXPORTER_OTLP_ENDPOINT is set; reuses the preload's SDK), metrics
 *   labelled service=<processName>, the gRPC clients' defaults;
 * - `events`: JetStream when NATS_URL is set, else the in-process transport;
 * - `storage`: S3 when S3_ENDPOINT is set, else files under $DATA_DIR/objects;
 * - each module in order on one shared context, registered in the address book as it starts (a module
 *   reaches one started before it in this process, the others through *_ADDR / *_URL);
 * - `readiness` last, so it stops first: readiness turns 503 (lifecycle.stopping) and SHUTDOWN_DRAIN_MS
 *   passes before any module stops taking work.
 */
export async function startModules(steps: Steps, opts: StartModulesOptions): Promise<StartedModules> {
  const { config, logger } = opts;
  const { step } = steps;
  configureGrpcClients({ deadlineMs: config.grpcDeadlineMs, inProcess: config.grpcInProcess });
  setMetricsService(opts.processName);
  const telemetry = await step(
    'telemetry',
    () => startTelemetry(config, `imagegen-${opts.processName}`),
    (t) => t.stop(),
  );
  const events = await step(
    'events',
    () => createEventTransport(config, logger),
    (e) => e.close(),
  );
  const storage = await step('storage', () =>
    createStorage({
      s3Endpoint: config.s3?.endPoint,
      s3AccessKey: config.s3?.accessKey,
      s3SecretKey: config.s3?.secretKey,
      s3Bucket: config.s3?.bucket,
      s3PublicUrl: config.s3?.publicUrl,
      dataDir: config.dataDir,
      publicBaseUrl: config.publicBaseUrl,
    }),
  );
  const known: Partial<Record<ServiceName, string>> = {};
  const ctx: ServiceContext = { config, logger, events, storage, resolve: createResolver(config, known) };
  const modules: StartedModules['modules'] = [];
  for (const m of opts.modules) {
    const moduleCtx = { ...ctx, logger: opts.moduleLogger?.(m.name) ?? logger.child({ module: m.name }) };
    const running = await step(
      m.name,
      () => m.start(moduleCtx),
      (r) => r.stop(),
    );
    modules.push({ name: m.name, running });
    if (m.registersAs) known[m.registersAs] = running.grpcAddress ?? running.httpUrl;
    m.started?.(running, config);
  }
  await opts.afterModules?.(step, modules);
  await step(
    'readiness',
    () => setReadyGauge(true),
    async () => {
      lifecycle.stopping = true;
      setReadyGauge(false);
      if (config.shutdownDrainMs > 0) await sleep(config.shutdownDrainMs);
    },
  );
  return { ctx, telemetry, modules };
}

export interface StandaloneOptions {
  env?: NodeJS.ProcessEnv;
  /** Default true: SIGTERM/SIGINT stop the service and exit the process. */
  handleSignals?: boolean;
  /**
   * Default true: serve /metrics, /livez, /readyz, /health on OPS_PORT (or HTTP_PORT). False for a
   * service that serves them on its own HTTP port (the gateway's ops routes).
   */
  opsServer?: boolean;
}

export interface StandaloneProcess {
  config: Config;
  logger: Logger;
  running: RunningService;
  /** Base URL of the ops server (/metrics, /livez, /readyz, /health), when one runs. */
  opsUrl?: string;
  /** Graceful stop (what SIGTERM does, without exiting). */
  stop(): Promise<void>;
}

/**
 * The distributed shape's entry point (`services/<name>/src/main.ts`): one service in this process,
 * configured from the environment, started by startModules (the same steps as the all-in-one, with this one
 * module) after its own first step, the ops server:
 *
 * - config (loadConfig; a bad setting is one line on stderr and exit 2), pino logger, crash handlers;
 * - `ops server`: GET /metrics, /livez, /readyz (RunningService.ready()), /health on OPS_PORT, or HTTP_PORT
 *   for services without an HTTP server of their own (the gateway serves the same paths on its own port
 *   through its ops routes). With OPS_PORT set it listens before anything else starts (live, not ready,
 *   while e.g. waiting for NATS); it stops last;
 * - startModules: telemetry, events, storage, the service, readiness (each step timed and logged);
 * - SIGTERM/SIGINT: readiness turns 503, SHUTDOWN_DRAIN_MS passes, the service stops taking work and finishes
 *   in-flight requests and messages (RunningService.stop), then the transport and telemetry are flushed and
 *   closed; past SHUTDOWN_GRACE_MS (+ drain) the process exits with status 1. A second signal exits at once.
 */
export async function runStandalone(name: string, start: StartService, opts: StandaloneOptions = {}): Promise<StandaloneProcess> {
  const env = opts.env ?? process.env;
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${name}: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const logger = createLogger(name, config.logLevel);
  installCrashHandlers(logger);
  const preloaded = telemetryRunning();
  const steps = createSteps({ logger, level: 'info' });
  const stop = () => steps.stop();
  let running: RunningService | undefined;

  const readiness = async (): Promise<{ ready: boolean; reason?: string }> => {
    if (lifecycle.stopping) return { ready: false, reason: 'shutting down' };
    if (!running) return { ready: false, reason: 'starting' };
    if (!running.ready) return { ready: true };
    try {
      const ok = await withTimeout(running.ready(), 3000);
      return ok ? { ready: true } : { ready: false, reason: 'a dependency is unavailable' };
    } catch (err) {
      return { ready: false, reason: (err as Error).message || 'readiness check failed' };
    }
  };

  const opsWanted = opts.opsServer !== false;
  let ops: { server: Server; url: string } | undefined;
  const startOps = async (port: number) => {
    ops = await startOpsServer({ host: config.host, port, readiness, logger }).catch((err) => {
      throw listenProblem(err, config.host, port, config.opsPort !== undefined ? 'OPS_PORT' : 'HTTP_PORT') ?? err;
    });
    logger.info({ url: ops.url }, 'ops endpoints: /metrics /livez /readyz');
  };

  if (opts.handleSignals !== false) {
    let signalled = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (signalled) {
        logger.warn({ signal }, 'second signal: exiting now');
        process.exit(1);
      }
      signalled = true;
      logger.info({ signal, graceMs: config.shutdownGraceMs }, 'shutting down');
      exitAfter(stop(), { logger, graceMs: config.shutdownGraceMs + config.shutdownDrainMs });
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  }

  let tracing = false;
  try {
    // Listens first when OPS_PORT is set; closes last in any case (also a server started on HTTP_PORT below).
    await steps.step(
      'ops server',
      async () => {
        if (opsWanted && config.opsPort !== undefined) await startOps(config.opsPort);
      },
      () => closeServer(ops?.server),
    );
    const started = await startModules(steps, {
      config,
      logger,
      processName: name,
      modules: [{ name, start }],
      moduleLogger: () => logger,
      afterModules: async (step, [only]) => {
        running = only.running;
        if (ops || !opsWanted) return;
        const ownPort = running.httpUrl ? Number(new URL(running.httpUrl).port) : undefined;
        if (ownPort === undefined || (config.httpPort !== 0 && ownPort !== config.httpPort)) {
          await step('ops server on HTTP_PORT', () => startOps(config.httpPort));
        } else logger.warn('this service serves HTTP itself and OPS_PORT is not set: no /metrics, /livez, /readyz endpoints');
      },
    });
    tracing = started.telemetry.active;
  } catch (err) {
    if (err instanceof StoppedWhileStarting) {
      // A signal arrived while starting: the signal handler stops and exits.
      logger.info(err.message);
      await stop();
      if (opts.handleSignals !== false) return new Promise<never>(() => {});
      throw err;
    }
    // A cause outside the code (NATS unreachable past NATS_CONNECT_TIMEOUT_MS, a port taken...): one line, exit 2.
    const known = err instanceof StartupError || err instanceof ConfigError;
    if (known) logger.fatal({ cause: err.message }, `${name} failed to start: ${err.message}`);
    else logger.fatal({ err }, `${name} failed to start`);
    await stop().catch(() => {});
    if (opts.handleSignals !== false) {
      if (known) process.stderr.write(`${name}: ${err.message}\n`);
      process.exit(known ? 2 : 1);
    }
    throw err;
  }
  if (tracing && !preloaded) {
    logger.warn(
      'tracing started without the preload: modules loaded before it (gRPC) are not instrumented; start with --import ./libs/platform/src/telemetry-preload.ts',
    );
  }
  logger.info({ grpc: running?.grpcAddress, http: running?.httpUrl, ops: ops?.url, tracing }, `${name} started`);
  return { config, logger, running: running as RunningService, opsUrl: ops?.url, stop };
}

/**
 * Exits the process once `stopped` settles: status 0 (logging `stopped`), 1 when it failed or took longer
 * than `graceMs` (logging `graceful shutdown took too long`). The signal handlers of runStandalone and the
 * all-in-one runner.
 */
export function exitAfter(stopped: Promise<void>, opts: { logger: Logger; graceMs: number }): void {
  const { logger, graceMs } = opts;
  const force = setTimeout(() => {
    logger.error({ graceMs }, 'graceful shutdown took too long; exiting');
    process.exit(1);
  }, graceMs);
  force.unref();
  stopped.then(
    () => {
      logger.info('stopped');
      process.exit(0);
    },
    (err) => {
      logger.error({ err }, 'shutdown failed');
      process.exit(1);
    },
  );
}

/**
 * The ops endpoints on a plain node:http server (no framework: it must stay up when all else is down).
 * /livez and /health answer `{status:'ok', timestamp, version, commit}` (buildInfo(): what this process runs).
 */
export async function startOpsServer(opts: {
  host?: string;
  port: number;
  readiness: () => Promise<{ ready: boolean; reason?: string }>;
  logger?: Logger;
}): Promise<{ server: Server; url: string }> {
  const { version, commit } = buildInfo();
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, body: unknown, type = 'application/json; charset=utf-8') => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      res.end(typeof body === 'string' ? body : JSON.stringify(body));
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, { error: 'Method not allowed' });
    if (path === '/livez' || path === '/health') return send(200, { status: 'ok', timestamp: new Date().toISOString(), version, commit });
    if (path === '/readyz') {
      opts.readiness().then(
        (r) => {
          setReadyGauge(r.ready);
          send(r.ready ? 200 : 503, r.ready ? { status: 'ready' } : { status: 'not_ready', reason: r.reason });
        },
        (err) => send(503, { status: 'not_ready', reason: String(err) }),
      );
      return;
    }
    if (path === '/metrics') {
      metricsText().then(
        (m) => send(200, m.body, m.contentType),
        (err) => {
          opts.logger?.error({ err }, 'metrics collection failed');
          send(500, { error: 'Internal server error' });
        },
      );
      return;
    }
    send(404, { error: `Route ${req.method} ${path} not found` });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return { server, url: `http://127.0.0.1:${port}` };
}

/**
 * A failed listen as a StartupError naming the setting (`PORT`, `OPS_PORT`...) and the cause in one line;
 * undefined for an error that is not about the address.
 */
export function listenProblem(err: unknown, host: string, port: number, setting: string): StartupError | undefined {
  const code = (err as NodeJS.ErrnoException)?.code;
  if (code === 'EADDRINUSE') {
    const other = port > 0 && port < 65535 ? ` (e.g. ${setting}=${port + 1})` : '';
    return new StartupError(
      `${setting} ${port} is already in use on ${host}: stop the program using it or set another ${setting}${other}`,
      code,
    );
  }
  if (code === 'EACCES')
    return new StartupError(`${setting} ${port} on ${host} needs privileges this process lacks: use a port above 1023`, code);
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EINVAL') {
    return new StartupError(
      `HOST ${JSON.stringify(host)} is not an address of this machine (${code}): use 127.0.0.1, 0.0.0.0 or one of its addresses`,
      code,
    );
  }
  return undefined;
}

/**
 * Fails fast (StartupError, see listenProblem) when `host:port` cannot be bound, before anything slow starts.
 * Port 0 (any free port) always passes.
 */
export async function assertCanListen(host: string, port: number, setting: string): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const srv = createTcpServer();
    srv.once('error', (err) => reject(listenProblem(err, host, port, setting) ?? err));
    srv.listen({ host, port, exclusive: true }, () => srv.close(() => resolve()));
  });
}

function closeServer(server?: Server): Promise<void> {
  if (!server) return Promise.resolve();
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}

function installCrashHandlers(logger: Logger) {
  const KEY = Symbol.for('imagegen.crash-handlers');
  const g = globalThis as unknown as Record<symbol, boolean>;
  if (g[KEY]) return;
  g[KEY] = true;
  process.on('unhandledRejection', (reason) => {
    logger.fatal({ err: reason }, 'unhandled promise rejection');
    process.exit(1);
  });
  process.on('uncaughtException', (err) => {
    logger.fatal({ err }, 'uncaught exception');
    process.exit(1);
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
