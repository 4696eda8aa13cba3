import { availableParallelism, loadavg } from 'node:os';
import autocannon from 'autocannon';

export interface LoadResult {
  reqPerSec: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

/**
 * Runs autocannon against `url` and returns average req/s and latency percentiles (ms). With `paths`, the requests
 * go to each path in turn instead of the url's own.
 */
export async function load(
  url: string,
  opts: { connections: number; durationSec: number; headers?: Record<string, string>; paths?: string[] },
): Promise<LoadResult> {
  let next = 0;
  const paths = opts.paths;
  const requests = paths?.length
    ? [{ setupRequest: (req: { path: string }) => ({ ...req, path: paths[next++ % paths.length] }) }]
    : undefined;
  const r = await autocannon({ url, connections: opts.connections, duration: opts.durationSec, headers: opts.headers, requests });
  return { reqPerSec: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors };
}

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
