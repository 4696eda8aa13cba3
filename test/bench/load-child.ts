/**
 * The load generator in a process of its own (see util.ts load): stdin holds the JSON of load()'s arguments, the
 * answer is autocannon's figures as one JSON line on stdout. A server measured from another process, as a client
 * would reach it: in the bench's own process, autocannon's parsing of the answers (~750 KB each for a session
 * detail) ran on the server's event loop. With `sequential`, one client sends that many requests one after the
 * other (to each path in turn) and the latencies are timed to the microsecond (autocannon's are whole ms).
 */

import { text } from 'node:stream/consumers';
import autocannon from 'autocannon';

const { url, connections, durationSec, headers, paths, sequential } = JSON.parse(await text(process.stdin)) as {
  url: string;
  connections: number;
  durationSec: number;
  headers?: Record<string, string>;
  paths?: string[];
  sequential?: number;
};
if (sequential) {
  const origin = new URL(url).origin;
  const latencies: number[] = [];
  let non2xx = 0;
  const t0 = performance.now();
  for (let i = 0; i < sequential; i++) {
    const target = paths?.length ? `${origin}${paths[i % paths.length]}` : url;
    const start = performance.now();
    const res = await fetch(target, { headers });
    await res.arrayBuffer();
    latencies.push(performance.now() - start);
    if (res.status < 200 || res.status > 299) non2xx++;
  }
  const seconds = (performance.now() - t0) / 1000;
  const sorted = [...latencies].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
  process.stdout.write(
    `${JSON.stringify({ reqPerSec: sequential / seconds, p50: at(50), p99: at(99), non2xx, errors: 0, latencies: sorted })}\n`,
  );
} else {
  let next = 0;
  const requests = paths?.length
    ? [{ setupRequest: (req: { path: string }) => ({ ...req, path: paths[next++ % paths.length] }) }]
    : undefined;
  const r = await autocannon({ url, connections, duration: durationSec, headers, requests });
  process.stdout.write(
    `${JSON.stringify({ reqPerSec: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors })}\n`,
  );
}
