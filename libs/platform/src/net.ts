import { createServer } from 'node:net';

/** A TCP port on 127.0.0.1 that was free a moment ago (embedded PostgreSQL, tests); the caller binds it. */
export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => res(port));
    });
  });
}
