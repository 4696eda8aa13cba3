import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { connect, createServer as createTcpServer, type Socket, type Server as TcpServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase } from '@imagegen/platform';
import { renderImage } from '../../services/sandbox-provider/src/render.js';
import { createApi, createTestTenant } from '../support/api.js';
import { freePort, waitForUrl } from '../support/processes.js';
import { fmt, machineLoad, median, percentile } from './util.js';

// sharp is a dependency of the services, not of the test package.
const requireFromLibrary = createRequire(new URL('../../services/library/package.json', import.meta.url));
const sharp: any = requireFromLibrary('sharp');

const ROOT = new URL('../..', import.meta.url).pathname;
const PROMPT = 'a benchmark picture of a lighthouse at dusk';
/** Warm-up requests in flight at once: V8 optimises by call counts, so they need not be sequential. */
const WARMUP_CONCURRENCY = 4;
/** The warm-up goes in this many rounds over every server, so none of them idles long before the timed turns. */
const WARMUP_ROUNDS = 5;

/**
 * Issue 16 item 5: the generate path's own cost. A fixed upstream (both provider protocols, answering a
 * pre-encoded 1024x1024 PNG at once) and the all-in-one stack as a child process pointed at it; N sequential
 * unloaded POST /api/images n=1. Prints, with sharp's own CPU for the image work measured in the same run
 * (decode + 200x200 WebP thumbnail exactly as the library renders it):
 *  - CPU per stored image of the stack process (/proc/<pid>/stat, every thread: libvips' included),
 *  - added latency p50: the request's time minus the upstream's own time for it,
 *  - the targets (image work + 4 ms CPU, image work + 3 ms latency) and pass/fail,
 *  - the same for the floor (floor-server.ts), asked in turns with the stack (inTurns: every order of the servers
 *    in turn, each turn's CPU read after its background work settled), so both are measured in the same minutes
 *    of the host and beside the same image-work figure; BENCH_GENERATE_BASELINE adds another checkout's stack,
 *  - what one image costs in SQL statements and round trips (a second, short run through a counting proxy in
 *    front of PostgreSQL, so the timed run has no extra hop), gRPC calls and events published (/metrics).
 * BENCH_GENERATE_N (default 200) requests after BENCH_GENERATE_WARMUP (default 2,500, 4 at a time): the figures
 * are the steady state of a service that has run a while. V8 optimises a function after enough calls, and the
 * many called once per request get there late: after 30 requests it compiled 10-30 functions per 2 s, after
 * 1,000 still 2-7 per second (--trace-opt), on its helper threads, a cost a long-running stack does not pay.
 * After 600 requests the stack measured 42-44 ms of CPU per image (main thread 13-15 ms), after 2,500 39 ms (12).
 */
export async function benchGeneratePath(): Promise<void> {
  const n = Number(process.env.BENCH_GENERATE_N ?? 200);
  const warmup = Number(process.env.BENCH_GENERATE_WARMUP ?? 2500);
  const png = await renderImage({ width: 1024, height: 1024, format: 'png', text: PROMPT });
  const upstream = await startFixedUpstream(png);
  try {
    // The timed runs: the stack (talking to PostgreSQL directly) and the floor (floor-server.ts: the least a durable
    // service doing the same job pays here), both running, asked in turns of BLOCK requests with sharp's own image
    // work measured between the turns: the host's changes (its steal time moved sharp's figure by 40% within an
    // hour) then weigh on the three figures alike, and "above the image work" compares like with like.
    // Started in this order, then warmed up in rounds together, so none idles long before the timed turns (a server
    // left idle for minutes after its warm-up measured up to 4 ms more CPU per image).
    const floorServer = await startFloorServer(upstream.url);
    // BENCH_GENERATE_BASELINE=<dir>: another checkout's stack (e.g. `git worktree add <dir> main`, installed),
    // asked in the same turns: an A/B of a change on the same minutes of the host.
    const baselineRoot = process.env.BENCH_GENERATE_BASELINE;
    const base = baselineRoot ? await startChildStack(upstream.url, undefined, baselineRoot).catch(stopAfter(floorServer)) : undefined;
    const timed = await startChildStack(upstream.url).catch(stopAfter(floorServer, base));
    let run: Timed;
    let floor: Timed;
    let baseline: { run: Timed; diffs: { cpu: number; added: number }[] } | undefined;
    let sharpCpu: number;
    try {
      const servers = base ? [timed, floorServer, base] : [timed, floorServer];
      for (let round = 0; round < WARMUP_ROUNDS; round++)
        for (const server of servers) await server.request(Math.ceil(warmup / WARMUP_ROUNDS), WARMUP_CONCURRENCY);
      const idleCpuPerSec = await idleCpu(timed.pid, 2000);
      await sharpImageWork(png, 20); // warm-up of sharp in this process
      // BENCH_PERF=<dir>: perf.data (the stack) and perf-floor.data (the floor), the timed turns only.
      const perfDir = process.env.BENCH_PERF;
      const perf = perfDir
        ? await Promise.all([
            recordPerf(timed.pid, join(perfDir, 'perf.data')),
            recordPerf(floorServer.pid, join(perfDir, 'perf-floor.data')),
          ])
        : undefined;
      const turns = await inTurns(servers, n, upstream, png);
      [run, floor] = turns.runs;
      sharpCpu = turns.sharpCpu;
      if (base) baseline = { run: turns.runs[2], diffs: pairedDiffs(turns.turns[0], turns.turns[2]) };
      await Promise.all(perf?.map((p) => p.stop()) ?? []);
      run.idleCpuPerSec = idleCpuPerSec;
    } finally {
      await Promise.all([timed.stop(), floorServer.stop(), base?.stop()]);
    }

    // The counting run: the same path through a proxy that reads the PostgreSQL protocol.
    const proxy = await startPgCountingProxy(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
    const counted = await startChildStack(upstream.url, proxy);
    let counts: Counts;
    try {
      await counted.request(10);
      const countN = Math.min(n, 50);
      const before = await counted.metrics();
      proxy.reset();
      const t0 = performance.now();
      await counted.request(countN);
      const seconds = (performance.now() - t0) / 1000;
      const sqlRun = proxy.snapshot();
      const after = await counted.metrics();
      proxy.reset();
      await new Promise((r) => setTimeout(r, 3000));
      const sqlIdle = proxy.snapshot();
      counts = { n: countN, seconds, sqlRun, sqlIdle, metrics: diffMetrics(before, after) };
    } finally {
      await counted.stop();
      await proxy.close();
    }

    report(n, warmup, png.length, run, sharpCpu, counts, floor, baseline);
  } finally {
    await upstream.close();
  }
}

// ---------------------------------------------------------------------------------------------------------
// The fixed upstream

interface FixedUpstream {
  url: string;
  /** The upstream's own time (request received -> answer sent, ms) of every call, in order. */
  times: number[];
  close(): Promise<void>;
}

/** provA (generateContent) and provB (images/generations) answering one pre-encoded picture at once. */
async function startFixedUpstream(png: Buffer): Promise<FixedUpstream> {
  const b64 = png.toString('base64');
  const provA = Buffer.from(
    JSON.stringify({
      candidates: [{ content: { role: 'model', parts: [{ inlineData: { mimeType: 'image/png', data: b64 } }] }, finishReason: 'STOP' }],
      usageMetadata: { totalTokenCount: 1290 },
    }),
  );
  const provB = Buffer.from(JSON.stringify({ created: 0, data: [{ b64_json: b64 }], usage: { total_tokens: 1290 } }));
  const times: number[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const t0 = performance.now();
    req.resume();
    req.on('end', () => {
      const body = req.url?.includes(':generateContent') ? provA : req.url?.includes('/images/') ? provB : undefined;
      if (!body) {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
        return;
      }
      res.on('finish', () => times.push(performance.now() - t0));
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length }).end(body);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    times,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

// ---------------------------------------------------------------------------------------------------------
// The stack as a child process

interface Timed {
  cpuPerImageMs: number;
  wallPerImageMs: number;
  latencies: number[];
  added: number[];
  upstream: number[];
  failed: number;
  idleCpuPerSec: number;
  /** CPU per image by thread name. */
  threads: Map<string, number>;
  /** Times per image the main thread went to sleep and was woken (voluntary context switches). */
  wakeupsPerImage: number;
}

interface ChildStack {
  pid: number;
  /** `count` requests, `concurrency` at a time (default 1): the warm-up goes 4 at a time. */
  request(count: number, concurrency?: number): Promise<number[]>;
  timedRun(count: number, upstream: FixedUpstream): Promise<Timed>;
  metrics(): Promise<Map<string, number>>;
  stop(): Promise<void>;
}

async function startChildStack(upstreamUrl: string, proxy?: PgCountingProxy, root = ROOT): Promise<ChildStack> {
  const db = await createTestDatabase(undefined, 'benchgen');
  const dbUrl = proxy ? proxy.urlFor(db.url) : db.url;
  const dataDir = mkdtempSync(join(tmpdir(), 'imagegen-benchgen-'));
  const port = await freePort();
  const adminToken = `adm_${randomBytes(16).toString('hex')}`;
  // BENCH_CPU_PROF=<dir>: the stack writes a V8 CPU profile there when it stops (where its CPU goes).
  const nodeFlags = process.env.BENCH_CPU_PROF && !proxy ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  // BENCH_NODE_FLAGS: more node flags for the timed stack (e.g. --trace-gc), split on spaces.
  if (process.env.BENCH_NODE_FLAGS && !proxy && root === ROOT) nodeFlags.push(...process.env.BENCH_NODE_FLAGS.split(' ').filter(Boolean));
  // BENCH_PERF=<dir>: JIT symbols for perf (see recordPerf).
  if (process.env.BENCH_PERF && !proxy) nodeFlags.push('--perf-basic-prof-only-functions');
  const child: ChildProcess = spawn(process.execPath, [...nodeFlags, '--import', 'tsx', 'services/stack/src/main.ts'], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      DATABASE_URL: dbUrl,
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      ADMIN_TOKEN: adminToken,
      ADMIN_EMAIL: 'root@example.com',
      ADMIN_PASSWORD: 'correct horse battery staple',
      CREDENTIALS_KEY: randomBytes(32).toString('base64'),
      LOG_LEVEL: 'warn',
      ALLOW_LOOPBACK_FETCH: '1',
      RATE_LIMIT_DISABLED: '1',
      EVENTS_PREFIX: `bg${randomBytes(4).toString('hex')}`,
      PROVA_BASE_URL: upstreamUrl,
      PROVB_BASE_URL: upstreamUrl,
    },
    stdio: ['ignore', process.env.BENCH_NODE_FLAGS?.includes('--trace') && root === ROOT ? 'inherit' : 'ignore', 'inherit'],
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const baseUrl = `http://127.0.0.1:${port}`;
  try {
    await waitForUrl(`${baseUrl}/health`, 120_000);
  } catch (err) {
    child.kill('SIGKILL');
    await exited;
    await db.drop();
    throw err;
  }
  const api = createApi(baseUrl, adminToken);
  const tenant = await createTestTenant(api, `bg${randomBytes(4).toString('hex')}`, {
    rate_limit_per_minute: 100_000_000,
    monthly_quota_mb: 100_000_000,
  });
  const pid = child.pid as number;
  return {
    pid,
    ...requestDriver(pid, baseUrl, tenant.liveKey),
    async metrics() {
      const res = await fetch(`${baseUrl}/metrics`);
      return parseMetrics(await res.text());
    },
    stop: stopChild(child, exited, db, dataDir),
  };
}

/** Requests per turn in inTurns: a turn takes about a second, the host's changes take minutes. */
const BLOCK = 20;
/** A turn's CPU is read this long after its last answer (its background work included). */
const SETTLE_MS = 250;

/**
 * `count` timed requests to each server, in turns of BLOCK (each server's CPU read over its own turns only), and
 * sharp's image work (10 pictures) after each round of turns: the median of the rounds.
 */
async function inTurns(
  servers: ChildStack[],
  count: number,
  upstream: FixedUpstream,
  png: Buffer,
): Promise<{ runs: Timed[]; turns: Timed[][]; sharpCpu: number }> {
  const turns: Timed[][] = servers.map(() => []);
  const sharpRounds: number[] = [];
  for (let done = 0, round = 0; done < count; done += BLOCK, round++) {
    const size = Math.min(BLOCK, count - done);
    // Every order in turn (each round starts with the next server, every other round backwards): each server goes
    // first, and follows each other one, equally often.
    for (let k = 0; k < servers.length; k++) {
      const step = Math.floor(round / servers.length) % 2 === 0 ? k : servers.length - 1 - k;
      const i = (round + step) % servers.length;
      turns[i].push(await servers[i].timedRun(size, upstream));
    }
    sharpRounds.push(await sharpImageWork(png, 10));
  }
  return { runs: turns.map(mergeTimed), turns, sharpCpu: median(sharpRounds) };
}

/** A catch handler that stops the servers already started, then rethrows. */
const stopAfter =
  (...started: (ChildStack | undefined)[]) =>
  async (err: unknown): Promise<never> => {
    await Promise.all(started.map((s) => s?.stop()));
    throw err;
  };

/** A Timed's CPU per image by thread, largest first: `main thread 7.08, node 6.02, ...`. */
function byThread(t: Timed): string {
  const rows = [...t.threads.entries()].filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]);
  return rows.map(([k, v]) => `${k} ${fmt(v, 2)}`).join(', ');
}

/** Per round of turns, this stack minus the baseline: CPU per image and added latency p50 (ms). */
function pairedDiffs(mine: Timed[], theirs: Timed[]): { cpu: number; added: number }[] {
  const p50 = (xs: number[]) =>
    percentile(
      [...xs].sort((a, b) => a - b),
      50,
    );
  return mine.map((t, i) => ({ cpu: t.cpuPerImageMs - theirs[i].cpuPerImageMs, added: p50(t.added) - p50(theirs[i].added) }));
}

/** One Timed of several turns of the same server: per-image figures weighted by each turn's answered requests. */
function mergeTimed(parts: Timed[]): Timed {
  const okOf = (t: Timed) => t.latencies.length;
  const ok = Math.max(
    1,
    parts.reduce((a, t) => a + okOf(t), 0),
  );
  const weighted = (pick: (t: Timed) => number) => parts.reduce((a, t) => a + pick(t) * okOf(t), 0) / ok;
  const threads = new Map<string, number>();
  for (const t of parts) for (const [k, v] of t.threads) threads.set(k, (threads.get(k) ?? 0) + (v * okOf(t)) / ok);
  return {
    cpuPerImageMs: weighted((t) => t.cpuPerImageMs),
    wallPerImageMs: weighted((t) => t.wallPerImageMs),
    latencies: parts.flatMap((t) => t.latencies),
    added: parts.flatMap((t) => t.added),
    upstream: parts.flatMap((t) => t.upstream),
    failed: parts.reduce((a, t) => a + t.failed, 0),
    idleCpuPerSec: 0,
    threads,
    wakeupsPerImage: weighted((t) => t.wakeupsPerImage),
  };
}

/** Stops a child server (SIGTERM, SIGKILL after 15 s) and removes its database and data directory. */
function stopChild(child: ChildProcess, exited: Promise<void>, db: { drop(): Promise<void> }, dataDir: string): () => Promise<void> {
  return async () => {
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  };
}

/** The floor server (floor-server.ts) as a child process, in a database of its own. */
async function startFloorServer(upstreamUrl: string): Promise<ChildStack> {
  const db = await createTestDatabase(undefined, 'benchfloor');
  const dataDir = mkdtempSync(join(tmpdir(), 'imagegen-benchfloor-'));
  const port = await freePort();
  const nodeFlags = process.env.BENCH_PERF ? ['--perf-basic-prof-only-functions'] : [];
  const child: ChildProcess = spawn(process.execPath, [...nodeFlags, '--import', 'tsx', 'test/bench/floor-server.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      DATABASE_URL: db.url,
      DATA_DIR: dataDir,
      PORT: String(port),
      UPSTREAM_URL: upstreamUrl,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const baseUrl = `http://127.0.0.1:${port}`;
  const stop = stopChild(child, exited, db, dataDir);
  try {
    await waitForUrl(`${baseUrl}/health`, 60_000);
  } catch (err) {
    await stop();
    throw err;
  }
  return { pid: child.pid as number, ...requestDriver(child.pid as number, baseUrl, 'floor'), metrics: async () => new Map(), stop };
}

/** Sequential POST /api/images n=1 against a server process `pid`, with its CPU read from /proc. */
function requestDriver(pid: number, baseUrl: string, apiKey: string): Pick<ChildStack, 'request' | 'timedRun'> {
  const body = JSON.stringify({ prompt: PROMPT, n: 1 });
  const one = async (): Promise<{ ok: boolean; ms: number }> => {
    const t0 = performance.now();
    const res = await fetch(`${baseUrl}/api/images`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
      body,
    });
    const text = await res.text();
    const ms = performance.now() - t0;
    if (res.status !== 200) console.error(`POST /api/images answered ${res.status}: ${text.slice(0, 300)}`);
    return { ok: res.status === 200, ms };
  };
  return {
    async request(count, concurrency = 1) {
      const out: number[] = [];
      let left = count;
      const worker = async () => {
        while (left-- > 0) out.push((await one()).ms);
      };
      await Promise.all(Array.from({ length: concurrency }, worker));
      return out;
    },
    async timedRun(count, upstream) {
      const latencies: number[] = [];
      const added: number[] = [];
      const ups: number[] = [];
      let failed = 0;
      const cpu0 = processCpuMs(pid);
      const threads0 = threadCpuMs(pid);
      const wakeups0 = mainThreadWakeups(pid);
      const t0 = performance.now();
      for (let i = 0; i < count; i++) {
        const calls = upstream.times.length;
        const r = await one();
        if (!r.ok) {
          failed++;
          continue;
        }
        const upstreamMs = upstream.times.slice(calls).reduce((a, b) => a + b, 0);
        latencies.push(r.ms);
        ups.push(upstreamMs);
        added.push(r.ms - upstreamMs);
      }
      const wall = performance.now() - t0;
      // The turn's own background work (events, their consumers, the outbox relay's marks) finishes inside its window
      // instead of landing in the next server's turn, where it competed for the cores (an A/A run measured the stack
      // that followed another stack 1-3 ms above it).
      await new Promise((r) => setTimeout(r, SETTLE_MS));
      const cpu = processCpuMs(pid) - cpu0;
      const wakeups = mainThreadWakeups(pid) - wakeups0;
      const ok = count - failed;
      const threads = new Map<string, number>();
      for (const [k, v] of threadCpuMs(pid)) threads.set(k, (v - (threads0.get(k) ?? 0)) / Math.max(1, ok));
      return {
        cpuPerImageMs: cpu / Math.max(1, ok),
        wallPerImageMs: wall / Math.max(1, ok),
        latencies,
        added,
        upstream: ups,
        failed,
        idleCpuPerSec: 0,
        threads,
        wakeupsPerImage: wakeups / Math.max(1, ok),
      };
    },
  };
}

/**
 * BENCH_PERF=<dir>: Linux perf samples a server's CPU (cpu-clock, every thread) during the timed turns only (the
 * other servers' turns too, while it idles), into `file`: <dir>/perf.data (the stack), <dir>/perf-floor.data (the
 * floor) (`perf report -i <dir>/perf.data --sort
 * comm,dso,sym`; `--sort pid` names the main thread, `--tid <pid>` keeps its samples). Unlike V8's --cpu-prof, whose
 * samples are wall time (a thread preempted inside a write or a thread-pool hand-off is charged for the wait),
 * these are CPU time.
 */
async function recordPerf(pid: number, file: string): Promise<{ stop(): Promise<void> }> {
  const perf = spawn('perf', ['record', '-q', '-e', 'cpu-clock', '-F', '4000', '-g', '-p', String(pid), '-o', file], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise<void>((r) => perf.once('exit', () => r()));
  await new Promise((r) => setTimeout(r, 500)); // attached to every thread before the first request
  return {
    async stop() {
      perf.kill('SIGINT');
      await exited;
    },
  };
}

/** User + system CPU of a process, every thread (utime and stime of /proc/<pid>/stat), in ms. */
function processCpuMs(pid: number, tid?: string): number {
  const stat = readFileSync(tid ? `/proc/${pid}/task/${tid}/stat` : `/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may contain spaces) start at field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / CLOCK_TICKS;
}
/** CPU (ms) of each thread of a process by thread name (main thread 'node', libuv pool, V8 workers, libvips). */
function threadCpuMs(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8')
        .trim()
        .replace(/[0-9]+$/, '');
      // BENCH_THREADS_BY_TID=1: every thread on its own (which 'node' thread is the libuv pool, which V8's).
      const key = tid === String(pid) ? 'main thread' : process.env.BENCH_THREADS_BY_TID ? `${name}#${tid}` : name;
      out.set(key, (out.get(key) ?? 0) + processCpuMs(pid, tid));
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

/**
 * Voluntary context switches of the main thread: each is one sleep in epoll_wait ended by I/O or a timer
 * (a steady count, beside the noisy CPU figures). An idle process pays ~0.1-0.2 ms of CPU per wake-up on
 * this VM (a timer every 10 ms: ~20 ms/s); between the steps of a request they were found much cheaper
 * (7 fewer per image, from 19.3 to 12.4, left the stack's CPU per image where it was).
 */
function mainThreadWakeups(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0);
}

/** sysconf(_SC_CLK_TCK): 100 on every Linux this runs on. */
const CLOCK_TICKS = 100;

/** The stack's own CPU while idle (pollers, heartbeats), in ms per second. */
async function idleCpu(pid: number, ms: number): Promise<number> {
  const c0 = processCpuMs(pid);
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  return (processCpuMs(pid) - c0) / ((performance.now() - t0) / 1000);
}

/**
 * The image work of one stored picture, exactly as the library does it (store-image.ts processImage): the
 * header, then decode + EXIF rotation + 200x200 fit-inside WebP thumbnail. CPU of this process (every
 * thread) per image, median of 5 batches.
 */
async function sharpImageWork(png: Buffer, count: number): Promise<number> {
  const batches: number[] = [];
  const per = Math.max(1, Math.round(count / 5));
  for (let b = 0; b < 5; b++) {
    const c0 = process.cpuUsage();
    for (let i = 0; i < per; i++) {
      await sharp(png).metadata();
      await sharp(png).rotate().resize(200, 200, { fit: 'inside', withoutEnlargement: true }).webp({ quality: 80, effort: 2 }).toBuffer();
    }
    const c = process.cpuUsage(c0);
    batches.push((c.user + c.system) / 1000 / per);
  }
  return median(batches);
}

// ---------------------------------------------------------------------------------------------------------
// /metrics

function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (
      !line.startsWith('imagegen_grpc_client_handled_total') &&
      !line.startsWith('imagegen_events_published_total') &&
      !line.startsWith('imagegen_events_consumed_total')
    )
      continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

function diffMetrics(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [k, v] of after) {
    const d = v - (before.get(k) ?? 0);
    if (d > 0) out.set(k, d);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// PostgreSQL protocol counting proxy

interface SqlCounts {
  /** Statements executed (extended-protocol Execute + simple Query), by statement text. */
  statements: Map<string, number>;
  /** Client writes carrying at least one statement after the server last answered: round trips. */
  roundTrips: number;
  transactions: number;
}

interface PgCountingProxy {
  urlFor(dbUrl: string): string;
  reset(): void;
  snapshot(): SqlCounts;
  close(): Promise<void>;
}

/**
 * A TCP proxy in front of PostgreSQL that reads the frontend messages (Parse names a statement's text,
 * Bind picks it, Execute runs it; Query is the simple protocol) and counts statements and round trips.
 */
async function startPgCountingProxy(baseUrl: string): Promise<PgCountingProxy> {
  const target = new URL(baseUrl);
  let counts: SqlCounts = { statements: new Map(), roundTrips: 0, transactions: 0 };
  const sockets = new Set<Socket>();
  const server: TcpServer = createTcpServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    sockets.add(client);
    sockets.add(upstream);
    const named = new Map<string, string>();
    let bound = '';
    let started = false;
    let pending: Buffer = Buffer.alloc(0);
    let serverSpoke = true;
    const count = (text: string) => {
      const key = text.replace(/\s+/g, ' ').trim().slice(0, 110);
      counts.statements.set(key, (counts.statements.get(key) ?? 0) + 1);
      if (/^commit\b/i.test(key)) counts.transactions++;
    };
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      let statements = 0;
      for (;;) {
        if (!started) {
          if (pending.length < 4) break;
          const len = pending.readInt32BE(0);
          if (pending.length < len) break;
          pending = pending.subarray(len);
          started = true;
          continue;
        }
        if (pending.length < 5) break;
        const type = String.fromCharCode(pending[0]);
        const len = pending.readInt32BE(1);
        if (pending.length < 1 + len) break;
        const body = pending.subarray(5, 1 + len);
        if (type === 'P') {
          const nameEnd = body.indexOf(0);
          const textEnd = body.indexOf(0, nameEnd + 1);
          named.set(body.subarray(0, nameEnd).toString(), body.subarray(nameEnd + 1, textEnd).toString());
        } else if (type === 'B') {
          const portalEnd = body.indexOf(0);
          const stmtEnd = body.indexOf(0, portalEnd + 1);
          bound = body.subarray(portalEnd + 1, stmtEnd).toString();
        } else if (type === 'E') {
          count(named.get(bound) ?? '?');
          statements++;
        } else if (type === 'Q') {
          count(body.subarray(0, body.length - 1).toString());
          statements++;
        }
        pending = pending.subarray(1 + len);
      }
      if (statements > 0 && serverSpoke) {
        counts.roundTrips++;
        serverSpoke = false;
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      serverSpoke = true;
      client.write(chunk);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', end);
    upstream.on('close', end);
    client.on('error', end);
    upstream.on('error', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    urlFor(dbUrl) {
      const u = new URL(dbUrl);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    reset() {
      counts = { statements: new Map(), roundTrips: 0, transactions: 0 };
    },
    snapshot() {
      return { statements: new Map(counts.statements), roundTrips: counts.roundTrips, transactions: counts.transactions };
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

// ---------------------------------------------------------------------------------------------------------
// Report

interface Counts {
  n: number;
  seconds: number;
  sqlRun: SqlCounts;
  sqlIdle: SqlCounts;
  metrics: Map<string, number>;
}

function report(
  n: number,
  warmup: number,
  pngBytes: number,
  run: Timed,
  sharpCpu: number,
  counts: Counts,
  floor: Timed,
  baseline?: { run: Timed; diffs: { cpu: number; added: number }[] },
): void {
  const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
  const added = sorted(run.added);
  const addedP50 = percentile(added, 50);
  const cpuTarget = sharpCpu + 4;
  const latencyTarget = sharpCpu + 3;
  const idleShare = (run.idleCpuPerSec * (run.wallPerImageMs + SETTLE_MS / BLOCK)) / 1000;
  const verdict = (ok: boolean) => (ok ? 'PASS' : 'FAIL');
  console.log(
    `\n== generate path: POST /api/images n=1, unloaded, ${n} sequential requests (in turns of ${BLOCK} with the floor) after ${warmup} warm-up, fixed upstream ==`,
  );
  console.log(`machine                          ${machineLoad()}`);
  console.log(
    `upstream answer                  1024x1024 PNG, ${pngBytes} bytes (base64 in JSON), own time p50 ${fmt(median(run.upstream), 2)} ms`,
  );
  console.log(`sharp's own image work (CPU)     ${fmt(sharpCpu, 2)} ms per image (header + decode + 200x200 WebP thumbnail)`);
  console.log(
    `stack CPU per stored image       ${fmt(run.cpuPerImageMs, 2)} ms (of which idle pollers ~${fmt(idleShare, 2)} ms; idle ${fmt(run.idleCpuPerSec, 1)} ms/s)  target <= ${fmt(cpuTarget, 2)} ms  ${verdict(run.cpuPerImageMs <= cpuTarget)}`,
  );
  console.log(
    `added latency p50                ${fmt(addedP50, 2)} ms (p90 ${fmt(percentile(added, 90), 2)} ms; request p50 ${fmt(percentile(sorted(run.latencies), 50), 2)} ms)  target <= ${fmt(latencyTarget, 2)} ms  ${verdict(addedP50 <= latencyTarget)}`,
  );
  console.log(
    `main-thread wake-ups per image   stack ${fmt(run.wakeupsPerImage, 2)}, floor ${fmt(floor.wakeupsPerImage, 2)} (sleeps in epoll_wait ended by I/O or a timer)`,
  );
  console.log(`  by thread: ${byThread(run)}`);
  if (run.failed) console.log(`failed requests                  ${run.failed}`);
  // The floor beside the stack: what is above the image work in each, and their ratio.
  const floorAdded = percentile(sorted(floor.added), 50);
  const stackCpuAbove = run.cpuPerImageMs - sharpCpu;
  const floorCpuAbove = floor.cpuPerImageMs - sharpCpu;
  console.log(
    `floor (one process, 4 round trips) CPU ${fmt(floor.cpuPerImageMs, 2)} ms, added latency p50 ${fmt(floorAdded, 2)} ms (asked in turns with the stack)`,
  );
  console.log(
    `above the image work             stack CPU ${fmt(stackCpuAbove, 2)} ms, latency ${fmt(addedP50 - sharpCpu, 2)} ms | floor CPU ${fmt(floorCpuAbove, 2)} ms, latency ${fmt(floorAdded - sharpCpu, 2)} ms | stack/floor CPU x${fmt(stackCpuAbove / Math.max(0.01, floorCpuAbove), 2)}`,
  );
  console.log(`  floor by thread: ${byThread(floor)}`);
  if (floor.failed) console.log(`floor failed requests            ${floor.failed}`);
  if (baseline) {
    const b = baseline.run;
    const bAdded = percentile(sorted(b.added), 50);
    const dCpu = sorted(baseline.diffs.map((d) => d.cpu));
    const dAdded = baseline.diffs.map((d) => d.added);
    console.log(
      `baseline (${process.env.BENCH_GENERATE_BASELINE}) CPU above the image work ${fmt(b.cpuPerImageMs - sharpCpu, 2)} ms, latency ${fmt(bAdded - sharpCpu, 2)} ms`,
    );
    console.log(
      `this - baseline, per round (median of ${dCpu.length}) CPU ${fmt(median(dCpu), 2)} ms (rounds ${fmt(percentile(dCpu, 25), 2)}..${fmt(percentile(dCpu, 75), 2)} IQR), added latency p50 ${fmt(median(dAdded), 2)} ms`,
    );
    console.log(`  baseline by thread: ${byThread(b)}`);
    if (b.failed) console.log(`baseline failed requests         ${b.failed}`);
  }

  const per = (x: number) => fmt(x / counts.n, 2);
  const idleScale = counts.seconds / 3;
  const total = [...counts.sqlRun.statements.values()].reduce((a, b) => a + b, 0);
  const idleTotal = [...counts.sqlIdle.statements.values()].reduce((a, b) => a + b, 0);
  console.log(
    `SQL per image                    ${per(total)} statements, ${per(counts.sqlRun.roundTrips)} round trips, ${per(counts.sqlRun.transactions)} transactions (${counts.n} requests; while idle the same time: ${fmt((idleTotal * idleScale) / counts.n, 2)} statements, ${fmt((counts.sqlIdle.roundTrips * idleScale) / counts.n, 2)} round trips per image)`,
  );
  const rows = [...counts.sqlRun.statements.entries()].sort((a, b) => b[1] - a[1]);
  for (const [text, c] of rows) console.log(`  ${per(c).padStart(6)}  ${text}`);
  const grpc = [...counts.metrics.entries()].filter(([k]) => k.startsWith('imagegen_grpc_client_handled_total'));
  const events = [...counts.metrics.entries()].filter(([k]) => k.startsWith('imagegen_events_'));
  console.log(`gRPC calls per image             ${per(grpc.reduce((a, [, v]) => a + v, 0))}`);
  for (const [k, v] of grpc) console.log(`  ${per(v).padStart(6)}  ${/method="([^"]+)"/.exec(k)?.[1] ?? k}`);
  console.log(
    `events per image                 ${per(events.filter(([k]) => k.includes('published')).reduce((a, [, v]) => a + v, 0))} published`,
  );
  for (const [k, v] of events) console.log(`  ${per(v).padStart(6)}  ${k.replace(/^imagegen_/, '')}`);
}
