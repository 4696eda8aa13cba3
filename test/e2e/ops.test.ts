import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createClient, readBuildInfo } from '@imagegen/platform';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeService } from '../distributed/fixtures/fake-service.js';
import { metricValue, REPO_ROOT, reservePort } from '../distributed/harness.js';
import { waitFor } from '../support/wait.js';

/**
 * runStandalone as a process: the ops endpoints (/livez, /readyz, /metrics, /health; the first two and
 * /metrics' imagegen_build_info name the version and commit), readiness
 * following RunningService.ready(), gRPC call metrics, and graceful shutdown (in-flight calls finish,
 * readiness turns 503 at once, exit 0; exit 1 past SHUTDOWN_GRACE_MS; exit 2 on bad configuration).
 */

const FIXTURE = join(REPO_ROOT, 'test/distributed/fixtures/fake-service.ts');
const ROOT_VERSION = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).version as string;
const procs: ChildProcess[] = [];

interface Fake {
  proc: ChildProcess;
  ops: string;
  grpc: string;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

async function startFake(env: Record<string, string> = {}): Promise<Fake> {
  const opsPort = await reservePort();
  const grpcPort = await reservePort();
  const proc = spawn(process.execPath, ['--import', 'tsx', FIXTURE], {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/root',
      OPS_PORT: String(opsPort),
      GRPC_PORT: String(grpcPort),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      SHUTDOWN_GRACE_MS: '10000',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  procs.push(proc);
  let out = '';
  proc.stdout?.on('data', (d) => (out += d));
  proc.stderr?.on('data', (d) => (out += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    proc.once('exit', (code, signal) => r({ code, signal })),
  );
  return { proc, ops: `http://127.0.0.1:${opsPort}`, grpc: `127.0.0.1:${grpcPort}`, output: () => out, exited };
}

async function get(url: string): Promise<{ status: number; body: any; type: string | null }> {
  const res = await fetch(url);
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, body, type: res.headers.get('content-type') };
}

afterEach(() => {
  for (const p of procs.splice(0)) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
});

describe('runStandalone ops endpoints and lifecycle', () => {
  it('is live but not ready while starting, then ready; readiness follows RunningService.ready()', async () => {
    const f = await startFake({ FAKE_START_MS: '1500' });
    await waitFor(async () => (await get(`${f.ops}/livez`)).status === 200, { message: 'ops server', timeout: 30_000, interval: 100 });
    const starting = await get(`${f.ops}/readyz`);
    expect(starting.status).toBe(503);
    expect(starting.body).toEqual({ status: 'not_ready', reason: 'starting' });
    await waitFor(async () => (await get(`${f.ops}/readyz`)).status === 200, { message: 'ready', timeout: 30_000, interval: 100 });
    expect((await get(`${f.ops}/readyz`)).body).toEqual({ status: 'ready' });
    // What the process runs: the root package.json's version, the checkout's commit (no IMAGEGEN_COMMIT here).
    const { version, commit } = readBuildInfo({ env: {} });
    for (const path of ['/livez', '/health']) {
      const live = await get(`${f.ops}${path}`);
      expect(live.body, path).toEqual({ status: 'ok', timestamp: expect.any(String), version, commit });
      expect(live.body.version, path).toBe(ROOT_VERSION);
    }
    expect((await get(`${f.ops}/nope`)).status).toBe(404);

    const client = createClient(FakeService, f.grpc);
    try {
      await client.setReady({ ready: false }, { requestId: 'r-ready' });
      const down = await get(`${f.ops}/readyz`);
      expect(down.status).toBe(503);
      expect(down.body.status).toBe('not_ready');
      expect((await get(`${f.ops}/livez`)).status).toBe(200);
      await client.setReady({ ready: true }, { requestId: 'r-ready2' });
      expect((await get(`${f.ops}/readyz`)).status).toBe(200);
    } finally {
      client.close();
    }
  });

  it('exposes Prometheus metrics: gRPC calls by method and code, readiness, build info, process metrics', async () => {
    const commit = 'c0ffee0000000000000000000000000000000040';
    const f = await startFake({ IMAGEGEN_COMMIT: commit });
    await waitFor(async () => (await get(`${f.ops}/readyz`)).status === 200, { message: 'ready', timeout: 30_000, interval: 100 });
    const client = createClient(FakeService, f.grpc);
    try {
      for (let i = 0; i < 3; i++) await client.ping({ delayMs: 0 }, { requestId: `r${i}` });
    } finally {
      client.close();
    }
    const m = await get(`${f.ops}/metrics`);
    expect(m.status).toBe(200);
    expect(m.type).toMatch(/^text\/plain/);
    const text = m.body as string;
    expect(metricValue(text, 'imagegen_grpc_server_handled_total', { service: 'fake', method: '/fake.Fake/Ping', code: 'OK' })).toBe(3);
    expect(metricValue(text, 'imagegen_grpc_server_handling_seconds_count', { method: '/fake.Fake/Ping' })).toBe(3);
    expect(metricValue(text, 'imagegen_ready', { service: 'fake' })).toBe(1);
    // IMAGEGEN_COMMIT (set by the image build) names the commit, in /metrics and /livez alike.
    expect(metricValue(text, 'imagegen_build_info', { service: 'fake', version: ROOT_VERSION, commit })).toBe(1);
    expect((await get(`${f.ops}/livez`)).body).toMatchObject({ version: ROOT_VERSION, commit });
    for (const name of [
      'process_cpu_seconds_total',
      'nodejs_eventloop_lag_seconds',
      'imagegen_events_consumed_total',
      'imagegen_provider_calls_total',
      'imagegen_circuit_breaker_state',
      'imagegen_outbox_lag',
    ]) {
      expect(text).toContain(name);
    }
  });

  it('SIGTERM: readiness turns 503 at once, the in-flight call finishes, the process exits 0', async () => {
    const f = await startFake({ SHUTDOWN_DRAIN_MS: '1000' });
    await waitFor(async () => (await get(`${f.ops}/readyz`)).status === 200, { message: 'ready', timeout: 30_000, interval: 100 });
    const client = createClient(FakeService, f.grpc);
    try {
      const inflight = client.ping({ delayMs: 2500 }, { requestId: 'slow' });
      await waitFor(() => f.output().includes('"msg":"ping received"'), { message: 'the call in its handler', timeout: 10_000 });
      f.proc.kill('SIGTERM');
      await waitFor(async () => (await get(`${f.ops}/readyz`)).status === 503, {
        message: 'not ready while draining',
        timeout: 5000,
        interval: 50,
      });
      const res = await inflight;
      expect(res.pong).toBe(true);
      const exit = await f.exited;
      expect(exit.code).toBe(0);
      expect(f.output()).toContain('"msg":"stopped"');
    } finally {
      client.close();
    }
  });

  it('exits 1 when stopping takes longer than SHUTDOWN_GRACE_MS', async () => {
    const f = await startFake({ FAKE_STOP_HANG: '1', SHUTDOWN_GRACE_MS: '500' });
    await waitFor(async () => (await get(`${f.ops}/readyz`)).status === 200, { message: 'ready', timeout: 30_000, interval: 100 });
    f.proc.kill('SIGTERM');
    const exit = await f.exited;
    expect(exit.code).toBe(1);
    expect(f.output()).toContain('graceful shutdown took too long');
  });

  it('exits 2 with a readable message on invalid configuration', async () => {
    const f = await startFake({ GRPC_PORT: 'not-a-port' });
    const exit = await f.exited;
    expect(exit.code).toBe(2);
    expect(f.output()).toContain('GRPC_PORT');
  });
});
