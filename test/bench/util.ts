import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';

export interface LoadResult {
  reqPerSec: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

/** A load's figures and, for a sequential one, every request's latency in ms, sorted. */
export type TimedLoad = LoadResult & { latencies?: number[] };

/**
 * Runs autocannon against `url` and returns average req/s and latency percentiles (ms). With `paths`, the requests
 * go to each path in turn instead of the url's own; with `sequential`, one client sends that many requests one after
 * the other (the latencies timed to the microsecond, every one returned). The load comes from a child process (load-child.ts), not from
 * the bench's own event loop, which often holds the server under test.
 */
export async function load(
  url: string,
  opts: { connections: number; durationSec: number; headers?: Record<string, string>; paths?: string[]; sequential?: number },
): Promise<TimedLoad> {
  // The arguments go in on stdin: a session list's paths can outgrow one argv string (128 KiB on Linux).
  const child = spawn(process.execPath, ['--import', 'tsx', LOAD_CHILD], { stdio: ['pipe', 'pipe', 'inherit'] });
  child.stdin.end(JSON.stringify({ url, ...opts }));
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    out += d;
  });
  // 'close', not 'exit': stdout may still hold the figures when the process has exited.
  const [code] = (await once(child, 'close')) as [number | null];
  if (code !== 0) throw new Error(`the load generator exited with ${code}`);
  return JSON.parse(out.trim().split('\n').at(-1) as string) as TimedLoad;
}

const LOAD_CHILD = fileURLToPath(new URL('./load-child.ts', import.meta.url));

export function fmt(n: number, digits = 1): string {
  return n.toFixed(digits);
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** The machine's 1-minute load average and core count, printed with every figure (the bench machine is shared). */
export function machineLoad(): string {
  return `load ${loadavg()[0].toFixed(2)} on ${availableParallelism()} cores`;
}

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
