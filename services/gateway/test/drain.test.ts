import { connect } from 'node:net';
import { expect, it } from 'vitest';
import { waitFor } from '../../../test/support/wait.js';
import { offlineContext } from '../scripts/openapi.js';
import { buildApp } from '../src/app.js';

/** Writes raw HTTP/1.1 requests on one keep-alive connection and collects what comes back. */
function rawConnection(port: number) {
  const socket = connect(port, '127.0.0.1');
  let received = '';
  socket.on('data', (d) => {
    received += d.toString('latin1');
  });
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  return {
    send: (path: string) => socket.write(`GET ${path} HTTP/1.1\r\nHost: gw\r\nConnection: keep-alive\r\n\r\n`),
    received: () => received,
    closed,
  };
}

it('while draining, a request on an open keep-alive connection gets the envelope 503 with Retry-After and Connection: close', async () => {
  const app = await buildApp(offlineContext('drain'));
  let release: () => void = () => {};
  const slow = new Promise<void>((r) => {
    release = r;
  });
  let inHandler = false;
  let draining = false;
  app.get('/test-slow', { schema: { hide: true } }, async () => {
    inHandler = true;
    await slow;
    return { ok: true };
  });
  // After the app's own preClose hook (registered first): the gateway is draining from here on.
  app.addHook('preClose', (done) => {
    draining = true;
    done();
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as { port: number }).port;
  const c = rawConnection(port);
  c.send('/test-slow');
  await waitFor(() => inHandler, { message: 'the slow request in its handler' });
  const closing = app.close();
  await waitFor(() => draining, { message: 'the gateway draining' });
  // Pipelined behind the in-flight request: answered once it is, while the server is closing.
  c.send('/health');
  release();
  await closing;
  await c.closed;
  const answers = c.received().split(/(?=HTTP\/1\.1 )/);
  expect(answers[0]).toMatch(/^HTTP\/1\.1 200/);
  expect(answers[1]).toMatch(/^HTTP\/1\.1 503/);
  expect(answers[1].toLowerCase()).toContain('retry-after: ');
  expect(answers[1].toLowerCase()).toContain('connection: close');
  expect(answers[1]).toContain('{"error":"Service temporarily unavailable"');
});
