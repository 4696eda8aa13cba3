import { libraryV1 } from '@imagegen/contracts';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { AppError } from '../src/errors.js';
import {
  bind,
  configureGrpcClients,
  createClient,
  type Handlers,
  internalPrincipal,
  RETRYABLE_METHODS,
  startGrpcServer,
} from '../src/grpc.js';

/**
 * Retries on UNAVAILABLE are for a replica that died (no answer). A handler that ran and answered 503 (its
 * database is down) is not tried again on the other replicas: that would only multiply the caller's wait.
 */
describe('gRPC retry pushback', () => {
  it('a retryable method answered 503 by its handler is called once, and the caller gets the 503 body', async () => {
    expect(RETRYABLE_METHODS.has(libraryV1.LibraryServiceService.getImage.path)).toBe(true);
    let calls = 0;
    // Only GetImage is exercised; the other methods exist because the server needs every handler.
    const handlers = Object.fromEntries(
      Object.keys(libraryV1.LibraryServiceService).map((name) => [
        name,
        name === 'getImage'
          ? async () => {
              calls++;
              throw new AppError(503, { error: 'Service temporarily unavailable' }, { 'retry-after': '2' });
            }
          : async () => Promise.reject(new AppError(501, { error: 'not here' })),
      ]),
    ) as unknown as Handlers<typeof libraryV1.LibraryServiceService>;
    const server = await startGrpcServer({
      services: [bind(libraryV1.LibraryServiceService, handlers)],
      logger: pino({ level: 'silent' }),
    });
    // Not the in-process path: the call goes over the wire, where grpc-js's retry policy applies.
    configureGrpcClients({ deadlineMs: 5000, inProcess: false });
    const client = createClient(libraryV1.LibraryServiceService, `ipv4:127.0.0.1:${server.port}`);
    try {
      const err = await client.getImage({ imageId: 1 }, internalPrincipal('t1')).catch((e) => e);
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).status).toBe(503);
      expect((err as AppError).headers['retry-after']).toBe('2');
      expect(calls).toBe(1);
    } finally {
      configureGrpcClients({ deadlineMs: 30_000, inProcess: true });
      client.close();
      await server.stop(100);
    }
  });
});
