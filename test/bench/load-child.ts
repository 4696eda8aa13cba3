/**
 * The load generator in a process of its own (see util.ts load): stdin holds the JSON of load()'s arguments, the
 * answer is autocannon's figures as one JSON line on stdout. A server measured from another process, as a client
 * would reach it: in the bench's own process, autocannon's parsing of the answers (~750 KB each for a session
 * detail) ran on the server's event loop.
 */

import { text } from 'node:stream/consumers';
import autocannon from 'autocannon';

const { url, connections, durationSec, headers, paths } = JSON.parse(await text(process.stdin)) as {
  url: string;
  connections: number;
  durationSec: number;
  headers?: Record<string, string>;
  paths?: string[];
};
let next = 0;
const requests = paths?.length
  ? [{ setupRequest: (req: { path: string }) => ({ ...req, path: paths[next++ % paths.length] }) }]
  : undefined;
const r = await autocannon({ url, connections, duration: durationSec, headers, requests });
process.stdout.write(
  `${JSON.stringify({ reqPerSec: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors })}\n`,
);
