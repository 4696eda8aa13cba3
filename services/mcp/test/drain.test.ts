import { connect } from 'node:net';
import { refuseWhileClosing } from '@imagegen/platform';
import Fastify from 'fastify';
import { expect, it } from 'vitest';
import { waitFor } from '../../../test/support/wait.js';

/**
 * mcp and oauth sit behind the gateway's proxy, which keeps connections to them open: during a rolling update a
 * request can reach a replica that is closing. It gets the dependency 503 with Retry-After and Connection: close
 * (refuseWhileClosing, as the gateway's own), never Fastify's bare 503 (no Retry-After: the client cannot know to retry).
 */
it('while closing, a request on an open keep-alive connection gets 503 with Retry-After and Connection: close', async () => {
  const app = Fastify({ return503OnClosing: false });
  refuseWhileClosing(app);
  let release: () => void = () => {};
  const slow = new Promise<void>((r) => {
    release = r;
  });
  let inHandler = false;
  let closingSeen = false;
  app.get('/slow', async () => {
    inHandler = true;
    await slow;
    return { ok: true };
  });
  app.get('/fast', async () => ({ ok: true }));
  app.addHook('preClose', (done) => {
    closingSeen = true;
    done();
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as { port: number }).port;
  const socket = connect(port, '127.0.0.1');
  let received = '';
  socket.on('data', (d) => {
    received += d.toString('latin1');
  });
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  const send = (path: string) => socket.write(`GET ${path} HTTP/1.1\r\nHost: mcp\r\nConnection: keep-alive\r\n\r\n`);
  send('/fast');
  await waitFor(() => received.includes('{"ok":true}'), { message: 'the first answer' });
  send('/slow');
  await waitFor(() => inHandler, { message: 'the slow request in its handler' });
  const closing = app.close();
  await waitFor(() => closingSeen, { message: 'the app closing' });
  // Pipelined behind the in-flight request: answered once it is, while the server is closing.
  send('/fast');
  release();
  await closing;
  await closed;
  const answers = received.split(/(?=HTTP\/1\.1 )/);
  expect(answers).toHaveLength(3);
  expect(answers[0]).toMatch(/^HTTP\/1\.1 200/);
  expect(answers[1]).toMatch(/^HTTP\/1\.1 200/);
  expect(answers[2]).toMatch(/^HTTP\/1\.1 503/);
  expect(answers[2].toLowerCase()).toContain('retry-after: 2');
  expect(answers[2].toLowerCase()).toContain('connection: close');
  expect(answers[2]).toContain('{"error":"Service temporarily unavailable"}');
});

it('refuses nothing before close()', async () => {
  const app = Fastify({ return503OnClosing: false });
  refuseWhileClosing(app);
  app.get('/fast', async () => ({ ok: true }));
  const res = await app.inject({ url: '/fast' });
  expect(res.statusCode).toBe(200);
  await app.close();
});
