import type { AddressInfo } from 'node:net';
import { connect, createServer, type Socket } from 'node:net';

/**
 * A TCP balancer standing for a Kubernetes Service in front of an HTTP service's pods (kube-proxy balances
 * connections, not requests): each new connection goes to the next backend in rotation, round robin. A
 * backend enters the rotation once it is ready and leaves it when its pod starts terminating; connections
 * already open to it stay open (as conntrack keeps them) until one side closes them.
 */
export async function startBalancer() {
  const rotation: string[] = [];
  const open = new Set<Socket>();
  let next = 0;
  let refused = 0;
  const server = createServer((client) => {
    open.add(client);
    client.once('close', () => open.delete(client));
    if (rotation.length === 0) {
      refused++;
      client.destroy();
      return;
    }
    const [host, port] = rotation[next++ % rotation.length].split(':');
    const upstream = connect({ host, port: Number(port) });
    open.add(upstream);
    upstream.once('close', () => open.delete(upstream));
    client.pipe(upstream);
    upstream.pipe(client);
    client.once('error', () => upstream.destroy());
    upstream.once('error', () => client.destroy());
    client.once('close', () => upstream.end());
    upstream.once('close', () => client.end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    /** Connections that found no backend in rotation (closed at once). */
    refused: () => refused,
    add(target: string) {
      if (!rotation.includes(target)) rotation.push(target);
    },
    remove(target: string) {
      const i = rotation.indexOf(target);
      if (i >= 0) rotation.splice(i, 1);
    },
    backends: () => [...rotation],
    /** Cuts every open connection (as a proxy restarting does); new ones are balanced as before. */
    dropConnections() {
      for (const s of open) s.destroy();
    },
    async close() {
      for (const s of open) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

export type Balancer = Awaited<ReturnType<typeof startBalancer>>;
