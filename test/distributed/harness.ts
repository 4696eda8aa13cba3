import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, type WriteStream } from 'node:fs';
import { createRequire } from 'node:module';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestDatabase } from '@imagegen/platform';
import { ensureDevelopmentChain } from '@imagegen/stack/dev-credentials.ts';
import { type Api, createApi, createTestTenant, type TestTenant } from '../support/api.js';
import { freePort } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

export { ALL_MODELS } from '../support/api.js';
export { freePort } from '../support/processes.js';

/**
 * The distributed shape under test: every service as its own OS process
 * (`node --import tsx services/<name>/src/main.ts`, exactly as deploy/Dockerfile runs them) against the
 * machine's PostgreSQL (a fresh database), NATS (a unique EVENTS_PREFIX, or a private nats-server),
 * Redis, and an in-test S3-protocol server (s3rver). Processes talk gRPC over loopback ports fixed for
 * the life of the harness, so a restarted process is found at the same address.
 */

const require = createRequire(import.meta.url);

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const PRELOAD = join(REPO_ROOT, 'libs/platform/src/telemetry-preload.ts');

/** Dependency order (processes start together; they stop in reverse order, one step at a time). */
export const SERVICE_STEPS = [
  ['sandbox-provider', 'tenancy', 'library', 'webhook-dispatcher'],
  ['usage-metering', 'oauth'],
  ['generation'],
  ['mcp'],
  ['gateway'],
] as const;
export type ServiceName = (typeof SERVICE_STEPS)[number][number];
export const ALL_SERVICES: ServiceName[] = SERVICE_STEPS.flat();

/** Services with an HTTP server of their own (on HTTP_PORT; the gateway on PORT). */
const HTTP_SERVICES: ServiceName[] = ['sandbox-provider', 'oauth', 'mcp'];
const GRPC_SERVICES: ServiceName[] = ['tenancy', 'library', 'generation', 'usage-metering', 'webhook-dispatcher'];

/** A free port below the ephemeral range (test/support/processes.ts), kept for the life of the harness. */
export const reservePort = freePort;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---- private nats-server (for the NATS restart test: never touch the machine's NATS on 4222) ----

export const NATS_SERVER_BIN =
  process.env.NATS_SERVER_BIN ?? (existsSync('/usr/sbin/nats-server') ? '/usr/sbin/nats-server' : 'nats-server');

export interface PrivateNats {
  url: string;
  port: number;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stops, waits `downMs`, starts again; with `emptyStore` the JetStream store is wiped meanwhile (a new node). */
  restart(downMs?: number, opts?: { emptyStore?: boolean }): Promise<void>;
  close(): Promise<void>;
  /**
   * JetStream's state of a durable consumer on the events stream of `eventsPrefix` (from the server's monitoring
   * endpoint); undefined while there is none. `ackPending`: delivered, not acked yet (a redelivery may follow).
   */
  consumer(eventsPrefix: string, durable: string): Promise<{ ackPending: number; pending: number; redelivered: number } | undefined>;
}

export async function startPrivateNats(): Promise<PrivateNats> {
  const port = await reservePort();
  const monitorPort = await reservePort();
  const storeDir = mkdtempSync(join(tmpdir(), 'imagegen-nats-'));
  let proc: ChildProcess | undefined;
  const start = async () => {
    const args = ['-a', '127.0.0.1', '-p', String(port), '-m', String(monitorPort), '-js', '-sd', storeDir];
    const p = spawn(NATS_SERVER_BIN, args, { stdio: 'ignore' });
    proc = p;
    track(p);
    await waitFor(() => tcpOpen(port), { message: 'private nats-server', timeout: 15_000, interval: 100 });
  };
  const stop = async () => {
    const p = proc;
    proc = undefined;
    if (!p || p.exitCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGTERM');
    await Promise.race([exited, sleep(5000).then(() => p.kill('SIGKILL'))]);
    await exited;
  };
  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    start,
    stop,
    async restart(downMs = 1000, o: { emptyStore?: boolean } = {}) {
      await stop();
      if (o.emptyStore) {
        rmSync(storeDir, { recursive: true, force: true });
        mkdirSync(storeDir, { recursive: true });
      }
      await sleep(downMs);
      await start();
    },
    async consumer(eventsPrefix, durable) {
      const stream = `${eventsPrefix.replace(/[^A-Za-z0-9_-]/g, '_').toUpperCase()}_EVENTS`;
      const res = await fetch(`http://127.0.0.1:${monitorPort}/jsz?accounts=true&streams=true&consumers=true`);
      const jsz = (await res.json()) as {
        account_details?: {
          stream_detail?: {
            name: string;
            consumer_detail?: { name: string; num_ack_pending: number; num_pending: number; num_redelivered: number }[];
          }[];
        }[];
      };
      const c = jsz.account_details
        ?.flatMap((a) => a.stream_detail ?? [])
        .find((st) => st.name === stream)
        ?.consumer_detail?.find((x) => x.name === durable);
      return c && { ackPending: c.num_ack_pending, pending: c.num_pending, redelivered: c.num_redelivered };
    },
    async close() {
      await stop();
      rmSync(storeDir, { recursive: true, force: true });
    },
  };
}

function tcpOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}
// ---- s3rver ----

export async function startS3(): Promise<{ endPoint: string; objectKeys(): string[]; stop(): Promise<void> }> {
  const S3rver = require('s3rver') as new (o: {
    address: string;
    port: number;
    directory: string;
    silent: boolean;
  }) => {
    run(): Promise<{ port: number }>;
    close(): Promise<void>;
  };
  const dir = mkdtempSync(join(tmpdir(), 'imagegen-s3-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, directory: dir, silent: true });
  const { port } = await server.run();
  return {
    endPoint: `http://127.0.0.1:${port}`,
    // s3rver keeps each object as <dir>/<bucket>/<key>._S3rver_object
    objectKeys: () =>
      (readdirSync(dir, { recursive: true }) as string[])
        .filter((f) => f.endsWith('._S3rver_object'))
        .map((f) => f.slice(f.indexOf('/') + 1, -'._S3rver_object'.length)),
    async stop() {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ---- child processes ----

const children = new Set<ChildProcess>();
function track(p: ChildProcess) {
  children.add(p);
  p.once('exit', () => children.delete(p));
}
// Never leave processes behind, even when the test process dies.
process.once('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

export interface ServiceProcess {
  name: ServiceName;
  /** 0 for the first (or only) replica of the service. */
  replica: number;
  proc?: ChildProcess;
  /** Base URL of the endpoints /metrics, /livez, /readyz (the gateway's own port for the gateway). */
  opsUrl: string;
  grpcAddress?: string;
  httpUrl?: string;
  logFile: string;
  /** The code folder the process runs from (REPO_ROOT unless started from another version's tree). */
  root?: string;
  exitCode?: number | null;
  exitSignal?: NodeJS.Signals | null;
}

export interface Journey {
  baseUrl: string;
  adminToken: string;
  sandboxUrl?: string;
  env: Record<string, string>;
  /** The first replica of each service. */
  services: Map<ServiceName, ServiceProcess>;
  /** Every replica of each service (JourneyOptions.replicas), the first one first. */
  instances: Map<ServiceName, ServiceProcess[]>;
  /** Base URL of every gateway replica (baseUrl is the first). */
  baseUrls: string[];
  logDir: string;
  /** fetch against the gateway with JSON helpers (test/support/api.ts). */
  api: Api;
  createTenant(body?: Record<string, unknown>): Promise<TestTenant>;
  /**
   * Starts (or restarts) one service process (its first replica unless told) and waits until it is ready; `root`
   * runs it from another code folder (another version's tree, with its own node_modules), default REPO_ROOT.
   */
  start(name: ServiceName, replica?: number, root?: string): Promise<void>;
  /** SIGKILL (crash) or SIGTERM (graceful); resolves when the process has exited. */
  kill(name: ServiceName, signal?: NodeJS.Signals, replica?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  logs(name: ServiceName, replica?: number): string;
  /** Keys of every object in the journey's S3 bucket. */
  objectKeys(): string[];
  stop(): Promise<void>;
}

export interface JourneyOptions {
  services?: ServiceName[];
  /** Default: the machine's NATS (NATS_URL or nats://127.0.0.1:4222). */
  natsUrl?: string;
  /** Starts every process with the telemetry preload exporting OTLP/HTTP here. */
  otlpEndpoint?: string;
  env?: Record<string, string>;
  /** Server on which the fresh database is created. Default: DATABASE_URL (the machine's PostgreSQL). */
  databaseUrl?: string;
  /**
   * Processes per service (default 1; the sandbox provider always has one). With two or more, each replica
   * has its own ports; gRPC clients get every replica as a static list (`ipv4:127.0.0.1:p1,127.0.0.1:p2`,
   * balanced per call), gateway i proxies to oauth i and mcp i (OAUTH_URL and MCP_URL name one server), and
   * mcp i checks tokens at oauth i+1 (so a token issued by one oauth replica is checked by the other).
   */
  replicas?: number | Partial<Record<ServiceName, number>>;
  /**
   * How many of each service's replicas startJourney starts (default: all); the others keep their ports, in
   * every gRPC client's address list, for a test to start later (a rolling update's surge slot).
   */
  started?: number;
  /** The code folder each service starts from at first (default REPO_ROOT): e.g. the previous version's tree. */
  root?: (name: ServiceName) => string;
  /** How long a started process may take to turn ready (default 150 s). */
  readyTimeoutMs?: number;
}

let tenantSeq = 0;

export async function startJourney(opts: JourneyOptions = {}): Promise<Journey> {
  const wanted = new Set(opts.services ?? ALL_SERVICES);
  const db = await createTestDatabase(opts.databaseUrl, 'dist');
  const s3 = await startS3();
  const dataDir = mkdtempSync(join(tmpdir(), 'imagegen-dist-'));
  const logDir = join(dataDir, 'logs');
  mkdirSync(logDir, { recursive: true });

  const count = (n: ServiceName) =>
    n === 'sandbox-provider' ? 1 : Math.max(1, (typeof opts.replicas === 'number' ? opts.replicas : opts.replicas?.[n]) ?? 1);
  // Replica 0 keeps the names `<service>:<kind>`; replica i > 0 is `<service>#i:<kind>`.
  const key = (n: ServiceName, i: number, kind: string) => (i === 0 ? `${n}:${kind}` : `${n}#${i}:${kind}`);
  const ports = new Map<string, number>();
  for (const name of ALL_SERVICES) {
    for (let i = 0; i < count(name); i++) {
      if (GRPC_SERVICES.includes(name)) ports.set(key(name, i, 'grpc'), await reservePort());
      if (HTTP_SERVICES.includes(name)) ports.set(key(name, i, 'http'), await reservePort());
      ports.set(key(name, i, name === 'gateway' ? 'http' : 'ops'), await reservePort());
    }
  }
  const gatewayPort = ports.get('gateway:http') as number;
  const grpcOf = (n: ServiceName, i = 0) => `127.0.0.1:${ports.get(key(n, i, 'grpc'))}`;
  /** The address gRPC clients use: every replica (a static list when there are several). */
  const grpc = (n: ServiceName) =>
    count(n) === 1 ? grpcOf(n) : `ipv4:${Array.from({ length: count(n) }, (_, i) => grpcOf(n, i)).join(',')}`;
  const http = (n: ServiceName, i = 0) => `http://127.0.0.1:${ports.get(key(n, i, 'http'))}`;
  const sandboxUrl = http('sandbox-provider');

  // Content Credentials: a chain as a deployment's Secret gives it (PEM text in C2PA_SIGNING_KEY / _CHAIN / TRUST_ANCHORS).
  const c2pa = await ensureDevelopmentChain(join(dataDir, 'c2pa'));
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    C2PA_SIGNING_KEY: readFileSync(c2pa.keyFile, 'utf8'),
    C2PA_SIGNING_CHAIN: readFileSync(c2pa.chainFile, 'utf8'),
    C2PA_TRUST_ANCHORS: readFileSync(c2pa.rootFile, 'utf8'),
    HOME: process.env.HOME ?? '/root',
    NODE_ENV: 'test',
    DATABASE_URL: db.url,
    NATS_URL: opts.natsUrl ?? process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    EVENTS_PREFIX: `dist${randomBytes(4).toString('hex')}`,
    S3_ENDPOINT: s3.endPoint,
    S3_ACCESS_KEY: 'S3RVER',
    S3_SECRET_KEY: 'S3RVER',
    S3_BUCKET: 'imagegen',
    DATA_DIR: dataDir,
    HOST: '127.0.0.1',
    GRPC_HOST: '127.0.0.1',
    PUBLIC_BASE_URL: `http://127.0.0.1:${gatewayPort}`,
    ADMIN_TOKEN: `adm_${randomBytes(16).toString('hex')}`,
    ADMIN_EMAIL: 'root@example.com',
    ADMIN_PASSWORD: 'correct horse battery staple',
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'info',
    ALLOW_LOOPBACK_FETCH: '1',
    DB_POOL_MAX: '2',
    SHUTDOWN_GRACE_MS: '15000',
    API_KEY_CACHE_TTL_MS: '1000',
    TENANCY_ADDR: grpc('tenancy'),
    LIBRARY_ADDR: grpc('library'),
    GENERATION_ADDR: grpc('generation'),
    USAGE_ADDR: grpc('usage-metering'),
    WEBHOOKS_ADDR: grpc('webhook-dispatcher'),
    OAUTH_URL: http('oauth'),
    MCP_URL: http('mcp'),
    PROVA_BASE_URL: `${sandboxUrl}/provA`,
    PROVB_BASE_URL: `${sandboxUrl}/provB`,
    ...(opts.otlpEndpoint ? { OTEL_EXPORTER_OTLP_ENDPOINT: opts.otlpEndpoint, OTEL_BSP_SCHEDULE_DELAY: '200' } : {}),
    ...opts.env,
  };

  const instances = new Map<ServiceName, ServiceProcess[]>();
  for (const name of ALL_SERVICES) {
    instances.set(
      name,
      Array.from({ length: count(name) }, (_, i) => ({
        name,
        replica: i,
        opsUrl: name === 'gateway' ? http(name, i) : `http://127.0.0.1:${ports.get(key(name, i, 'ops'))}`,
        grpcAddress: GRPC_SERVICES.includes(name) ? grpcOf(name, i) : undefined,
        httpUrl: name === 'gateway' || HTTP_SERVICES.includes(name) ? http(name, i) : undefined,
        logFile: join(logDir, i === 0 ? `${name}.log` : `${name}-${i + 1}.log`),
      })),
    );
  }
  const services = new Map<ServiceName, ServiceProcess>([...instances].map(([n, list]) => [n, list[0]]));
  const instance = (name: ServiceName, replica = 0) => {
    const sp = instances.get(name)?.[replica];
    if (!sp) throw new Error(`${name} has no replica ${replica}`);
    return sp;
  };

  const logStreams = new Map<ServiceProcess, WriteStream>();
  const start = async (name: ServiceName, replica = 0, root = REPO_ROOT) => {
    const sp = instance(name, replica);
    sp.root = root;
    const label = replica === 0 ? name : `${name}#${replica}`;
    if (sp.proc && sp.proc.exitCode === null && sp.proc.signalCode === null) throw new Error(`${label} is already running`);
    const own: Record<string, string> = { OTEL_SERVICE_NAME: `imagegen-${name}` };
    if (name === 'gateway') own.PORT = String(ports.get(key(name, replica, 'http')));
    else own.OPS_PORT = String(ports.get(key(name, replica, 'ops')));
    if (GRPC_SERVICES.includes(name)) own.GRPC_PORT = String(ports.get(key(name, replica, 'grpc')));
    if (HTTP_SERVICES.includes(name)) own.HTTP_PORT = String(ports.get(key(name, replica, 'http')));
    // OAUTH_URL and MCP_URL name one server: with replicas, gateway i uses oauth i and mcp i, mcp i checks tokens at oauth i+1.
    if (name === 'gateway' && !opts.env?.OAUTH_URL) own.OAUTH_URL = http('oauth', replica % count('oauth'));
    if (name === 'gateway' && !opts.env?.MCP_URL) own.MCP_URL = http('mcp', replica % count('mcp'));
    if (name === 'mcp' && !opts.env?.OAUTH_URL) own.OAUTH_URL = http('oauth', (replica + 1) % count('oauth'));
    const args = ['--import', 'tsx', ...(opts.otlpEndpoint ? ['--import', PRELOAD] : []), `services/${name}/src/main.ts`];
    let log = logStreams.get(sp);
    if (!log) {
      log = createWriteStream(sp.logFile, { flags: 'a' });
      logStreams.set(sp, log);
    }
    log.write(`\n---- start ${new Date().toISOString()}${root === REPO_ROOT ? '' : ` from ${root}`} ----\n`);
    const p = spawn(process.execPath, args, { cwd: root, env: { ...env, ...own }, stdio: ['ignore', 'pipe', 'pipe'] });
    track(p);
    p.stdout?.pipe(log, { end: false });
    p.stderr?.pipe(log, { end: false });
    sp.proc = p;
    sp.exitCode = undefined;
    sp.exitSignal = undefined;
    p.once('exit', (code, signal) => {
      sp.exitCode = code;
      sp.exitSignal = signal;
    });
    try {
      await waitFor(
        async () => {
          if (p.exitCode !== null || p.signalCode !== null) throw new ExitedError(`${label} exited with ${p.exitCode ?? p.signalCode}`);
          const res = await fetch(`${sp.opsUrl}/readyz`, { signal: AbortSignal.timeout(2000) });
          await res.arrayBuffer();
          return res.status === 200;
        },
        { message: `${label} to be ready`, timeout: opts.readyTimeoutMs ?? 150_000, interval: 250 },
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}\n--- ${label} log (tail) ---\n${tail(sp.logFile)}`);
    }
  };

  const kill: Journey['kill'] = async (name, signal = 'SIGKILL', replica = 0) => {
    const sp = instance(name, replica);
    const p = sp.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return { code: p?.exitCode ?? null, signal: p?.signalCode ?? null };
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
      p.once('exit', (code, sig) => r({ code, signal: sig })),
    );
    p.kill(signal);
    const timer = setTimeout(() => p.kill('SIGKILL'), 30_000);
    const r = await exited;
    clearTimeout(timer);
    return r;
  };

  const api = createApi(`http://127.0.0.1:${gatewayPort}`, env.ADMIN_TOKEN);

  const stopAll = async () => {
    const order = [...SERVICE_STEPS].reverse();
    for (const step of order) await Promise.all(step.flatMap((n) => (instances.get(n) ?? []).map((sp) => kill(n, 'SIGTERM', sp.replica))));
    for (const l of logStreams.values()) l.end();
    await s3.stop().catch(() => {});
    await db.drop().catch(() => {});
    if (!process.env.KEEP_DIST_LOGS) rmSync(dataDir, { recursive: true, force: true });
  };

  try {
    // All at once: gRPC clients connect lazily, and each process reports ready only when it can serve.
    await Promise.all(
      ALL_SERVICES.filter((n) => wanted.has(n)).flatMap((n) =>
        (instances.get(n) ?? []).slice(0, opts.started).map((sp) => start(n, sp.replica, opts.root?.(n) ?? REPO_ROOT)),
      ),
    );
  } catch (err) {
    await stopAll();
    throw err;
  }

  return {
    baseUrl: `http://127.0.0.1:${gatewayPort}`,
    adminToken: env.ADMIN_TOKEN,
    sandboxUrl: wanted.has('sandbox-provider') ? sandboxUrl : undefined,
    env,
    services,
    instances,
    baseUrls: (instances.get('gateway') ?? []).map((sp) => sp.httpUrl as string),
    logDir,
    api,
    createTenant: (body = {}) => createTestTenant(api, `d${++tenantSeq}${randomBytes(3).toString('hex')}`, body),
    start,
    kill,
    objectKeys: () => s3.objectKeys(),
    logs: (name, replica = 0) => (existsSync(instance(name, replica).logFile) ? readFileSync(instance(name, replica).logFile, 'utf8') : ''),
    stop: stopAll,
  };
}

class ExitedError extends Error {}

function tail(file: string, chars = 4000): string {
  try {
    const s = readFileSync(file, 'utf8');
    return s.slice(-chars);
  } catch {
    return '(no log)';
  }
}

/** Parses a Prometheus text exposition into `name{labels} value` lines (for assertions). */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  let sum: number | undefined;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const m = /^([^{\s]+)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const got: Record<string, string> = {};
    for (const kv of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) got[kv[1]] = kv[2];
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) sum = (sum ?? 0) + Number(m[3]);
  }
  return sum;
}
