import { createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createTcpServer } from 'node:net';
import type { Logger } from 'pino';
import { type Config, ConfigError, loadConfig, StartupError } from './config.js';
import { configureGrpcClients } from './grpc.js';
import { createLogger } from './logger.js';
import { metricsText, setMetricsService, setReadyGauge } from './metrics.js';
import { createEventTransport } from './runtime.js';
import { createResolver, type RunningService, type ServiceContext, type StartService } from './service.js';
import { createStorage } from './storage/index.js';
import { startTelemetry, telemetryRunning } from './telemetry.js';

/**
 * Process-wide lifecycle, read by readiness endpoints (runStandalone's ops server and the gateway's
 * ops routes): once `stopping` is set, readiness answers 503 so load balancers stop sending work.
 */
export const lifecycle = { stopping: false };

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
 * configured from the environment.
 *
 * - config (loadConfig), pino logger, OpenTelemetry (reuses the preload's SDK if present), Prometheus
 *   metrics labelled service=<name>;
 * - the event transport (JetStream when NATS_URL is set), object storage (S3 when S3_ENDPOINT is set),
 *   the address book from *_ADDR / *_URL variables;
 * - an ops HTTP server with GET /metrics, /livez, /readyz (RunningService.ready()), /health on OPS_PORT,
 *   or HTTP_PORT for services without an HTTP server of their own (the gateway serves the same paths
 *   on its own port through its ops routes). With OPS_PORT set it listens before the service starts
 *   (live, not ready, while e.g. waiting for NATS);
 * - SIGTERM/SIGINT: readiness turns 503, the service stops taking work and finishes in-flight requests
 *   and messages (RunningService.stop), then the transport and telemetry are flushed and closed; past
 *   SHUTDOWN_GRACE_MS the process exits with status 1. A second signal exits at once.
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
  configureGrpcClients({ deadlineMs: config.grpcDeadlineMs, inProcess: config.grpcInProcess });
  setMetricsService(name);
  installCrashHandlers(logger);

  const preloaded = telemetryRunning();
  const telemetry = await startTelemetry(config, `imagegen-${name}`);
  if (telemetry.active && !preloaded) {
    logger.warn(
      'tracing started without the preload: modules loaded before it (gRPC) are not instrumented; start with --import ./libs/platform/src/telemetry-preload.ts',
    );
  }
  const cleanups: { what: string; fn: () => Promise<unknown> }[] = [{ what: 'telemetry', fn: () => telemetry.stop() }];
  let running: RunningService | undefined;
  let started = false;

  const readiness = async (): Promise<{ ready: boolean; reason?: string }> => {
    if (lifecycle.stopping) return { ready: false, reason: 'shutting down' };
    if (!started || !running) return { ready: false, reason: 'starting' };
    if (!running.ready) return { ready: true };
    try {
      const ok = await withTimeout(running.ready(), 3000);
      return ok ? { ready: true } : { ready: false, reason: 'a dependency is unavailable' };
    } catch (err) {
      return { ready: false, reason: (err as Error).message || 'readiness check failed' };
    }
  };

  const opsWanted = opts.opsServer !== false;
  const opsPort = opsWanted ? config.opsPort : undefined;
  let ops: { server: Server; url: string } | undefined;
  const startOps = async (port: number) => {
    ops = await startOpsServer({ host: config.host, port, readiness, logger }).catch((err) => {
      throw listenProblem(err, config.host, port, config.opsPort !== undefined ? 'OPS_PORT' : 'HTTP_PORT') ?? err;
    });
    cleanups.push({ what: 'ops server', fn: () => closeServer(ops?.server) });
    logger.info({ url: ops.url }, 'ops endpoints: /metrics /livez /readyz');
  };

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      lifecycle.stopping = true;
      setReadyGauge(false);
      if (config.shutdownDrainMs > 0) await sleep(config.shutdownDrainMs);
      if (running) await running.stop().catch((err) => logger.error({ err }, 'error while stopping the service'));
      for (const c of cleanups.reverse()) {
        await c.fn().catch((err) => logger.warn({ err }, `error while closing ${c.what}`));
      }
      cleanups.length = 0;
    })();
    return stopping;
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
      const force = setTimeout(() => {
        logger.error({ graceMs: config.shutdownGraceMs }, 'graceful shutdown took too long; exiting');
        process.exit(1);
      }, config.shutdownGraceMs + config.shutdownDrainMs);
      force.unref();
      stop().then(
        () => {
          logger.info('stopped');
          process.exit(0);
        },
        (err) => {
          logger.error({ err }, 'shutdown failed');
          process.exit(1);
        },
      );
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  }

  try {
    if (opsPort !== undefined) await startOps(opsPort);
    const events = await createEventTransport(config, logger);
    cleanups.push({ what: 'event transport', fn: () => events.close() });
    const storage = createStorage({
      s3Endpoint: config.s3?.endPoint,
      s3AccessKey: config.s3?.accessKey,
      s3SecretKey: config.s3?.secretKey,
      s3Bucket: config.s3?.bucket,
      s3PublicUrl: config.s3?.publicUrl,
      dataDir: config.dataDir,
      publicBaseUrl: config.publicBaseUrl,
    });
    const ctx: ServiceContext = { config, logger, events, storage, resolve: createResolver(config) };
    if (lifecycle.stopping) throw new Error('stopped while starting');
    running = await start(ctx);
    started = true;
    if (!ops && opsWanted) {
      const ownPort = running.httpUrl ? Number(new URL(running.httpUrl).port) : undefined;
      if (ownPort === undefined) await startOps(config.httpPort);
      else if (config.httpPort !== 0 && ownPort !== config.httpPort) await startOps(config.httpPort);
      else logger.warn('this service serves HTTP itself and OPS_PORT is not set: no /metrics, /livez, /readyz endpoints');
    }
    setReadyGauge(true);
    logger.info({ grpc: running.grpcAddress, http: running.httpUrl, ops: ops?.url, tracing: telemetry.active }, `${name} started`);
  } catch (err) {
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
  return { config, logger, running, opsUrl: ops?.url, stop };
}

/** The ops endpoints on a plain node:http server (no framework: it must stay up when all else is down). */
export async function startOpsServer(opts: {
  host?: string;
  port: number;
  readiness: () => Promise<{ ready: boolean; reason?: string }>;
  logger?: Logger;
}): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, body: unknown, type = 'application/json; charset=utf-8') => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      res.end(typeof body === 'string' ? body : JSON.stringify(body));
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, { error: 'Method not allowed' });
    if (path === '/livez' || path === '/health') return send(200, { status: 'ok', timestamp: new Date().toISOString() });
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

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
