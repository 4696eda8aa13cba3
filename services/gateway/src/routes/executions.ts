import type { ActiveExecutionsQuery, Infer, SessionLogsQuery } from '@imagegen/api-schemas';
import type { Execution } from '@imagegen/contracts/generation/v1/generation';
import { executionJson, jobResult } from '@imagegen/operations';
import { AppError, type Principal } from '@imagegen/platform';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RouteModule } from '../types.js';

/**
 * Sessions' execution logs and executions (SPEC 4.8), legacy envelopes with `success`:
 *   GET /api/sessions/:sessionId/logs           {success, sessionId, executions, total}
 *   GET /api/sessions/:sessionId/logs/stream    SSE for the session's active executions (polls every `interval` ms)
 *   GET /api/executions/active                  {success, executions, total}
 *   GET /api/executions/:executionId            {success, execution} with logEntries
 *   GET /api/executions/:executionId/stream     SSE for one execution, ends after `complete` or `error`
 * SSE events (SPEC 6): `log` {executionId, timestamp, message, level}, `status` {executionId, status,
 * progressPercent, currentStep}, `complete` {executionId, execution}, `error` {executionId?, error, execution?},
 * and `heartbeat` {timestamp} every `heartbeat` ms (default 15000). Another tenant's ids answer 404.
 * The execution stream's final event has id 'final': an EventSource reconnecting with Last-Event-ID: final
 * gets 204 (which stops it) instead of a replay.
 */

const _DEFAULT_INTERVAL_MS = 1000;
const _DEFAULT_HEARTBEAT_MS = 15_000;
const FINISHED = new Set(['completed', 'failed', 'cancelled']);
const FINAL_EVENT_ID = 'final';

/** An open SSE response: named events, heartbeats, cleanup on disconnect or gateway shutdown. */
class SseStream {
  closed = false;
  private timers: NodeJS.Timeout[] = [];

  constructor(
    req: FastifyRequest,
    private readonly reply: FastifyReply,
    heartbeatMs: number,
    private readonly registry: Set<SseStream>,
  ) {
    reply.hijack();
    reply.raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      'x-request-id': req.id,
    });
    reply.raw.write('retry: 3000\n\n');
    registry.add(this);
    this.timers.push(setInterval(() => this.send('heartbeat', { timestamp: new Date().toISOString() }), heartbeatMs));
    req.raw.on('close', () => this.close());
    reply.raw.on('close', () => this.close());
    // A write to a connection that broke (EPIPE, ECONNRESET) ends this stream, never the process.
    reply.raw.on('error', () => this.close());
  }

  send(event: string, data: unknown, id?: string): void {
    if (this.closed) return;
    reply(this.reply, `${id ? `id: ${id}\n` : ''}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  every(ms: number, fn: () => Promise<void>): void {
    let busy = false;
    const t = setInterval(() => {
      if (busy || this.closed) return;
      busy = true;
      // fn reports its own failures as SSE events; anything else it throws ends this stream, not the process.
      fn()
        .catch(() => this.close())
        .finally(() => {
          busy = false;
        });
    }, ms);
    this.timers.push(t);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    this.registry.delete(this);
    if (!this.reply.raw.writableEnded) this.reply.raw.end();
  }
}

function reply(r: FastifyReply, chunk: string) {
  if (!r.raw.writableEnded && !r.raw.destroyed) r.raw.write(chunk);
}

const errorText = (err: unknown) => (err instanceof AppError ? err.body.error : 'Internal server error');

/** Follows executions: emits new log lines, status changes and the final complete/error once each. */
class ExecutionFollower {
  private sentLogs = new Map<string, number>();
  private lastStatus = new Map<string, string>();
  private done = new Set<string>();

  /** finalId: the SSE id of the complete/error event (the execution stream sets it so reconnects end at once). */
  constructor(
    private readonly sse: SseStream,
    private readonly finalId?: string,
  ) {}

  isDone(id: string) {
    return this.done.has(id);
  }

  /** `result`: a completed job's result (its operation's synchronous answer), sent with `complete`. */
  push(e: Execution, result?: unknown): void {
    if (this.done.has(e.executionId)) return;
    const sent = this.sentLogs.get(e.executionId) ?? 0;
    for (const l of e.logEntries.slice(sent)) {
      this.sse.send('log', {
        executionId: e.executionId,
        sessionId: e.sessionId,
        timestamp: l.timestamp,
        message: l.message,
        level: l.level,
      });
    }
    this.sentLogs.set(e.executionId, Math.max(sent, e.logEntries.length));
    const status = `${e.status}|${e.progressPercent}|${e.currentStep}`;
    if (this.lastStatus.get(e.executionId) !== status) {
      this.lastStatus.set(e.executionId, status);
      this.sse.send('status', {
        executionId: e.executionId,
        sessionId: e.sessionId,
        toolName: e.toolName,
        status: e.status,
        progressPercent: e.progressPercent,
        currentStep: e.currentStep,
      });
    }
    if (FINISHED.has(e.status)) {
      this.done.add(e.executionId);
      if (e.status === 'completed') {
        this.sse.send(
          'complete',
          {
            executionId: e.executionId,
            sessionId: e.sessionId,
            execution: executionJson(e, false),
            ...(result === undefined ? {} : { result }),
          },
          this.finalId,
        );
      } else {
        this.sse.send(
          'error',
          { executionId: e.executionId, sessionId: e.sessionId, error: e.error ?? 'Execution failed', execution: executionJson(e, false) },
          this.finalId,
        );
      }
    }
  }
}

const executionsRoutes: RouteModule = (app: FastifyInstance, { clients }) => {
  const generation = clients.generation;
  const open = new Set<SseStream>();
  // Open streams would keep the HTTP server from closing.
  app.addHook('preClose', async () => {
    for (const s of [...open]) s.close();
  });

  app.get('/api/sessions/:sessionId/logs', async (req) => {
    const { sessionId } = req.params as { sessionId: string };
    const { limit } = req.query as Infer<typeof SessionLogsQuery>;
    const r = await generation.listSessionExecutions({ sessionId, limit, includeLogs: true }, req.principal);
    return {
      success: true,
      sessionId,
      executions: r.executions.map((e) => executionJson(e, true)),
      total: r.total,
      totalIsExact: r.totalIsExact,
    };
  });

  app.get('/api/sessions/:sessionId/logs/stream', async (req, replyObj) => {
    const { sessionId } = req.params as { sessionId: string };
    const { interval, heartbeat } = req.query as { interval: number; heartbeat: number };
    const principal: Principal = req.principal;
    // 404 before the stream starts (unknown session, or another tenant's).
    await generation.listSessionExecutions({ sessionId, limit: 1, includeLogs: false }, principal);
    const since = new Date(Date.now() - 1000).toISOString();
    const sse = new SseStream(req, replyObj, heartbeat, open);
    const follower = new ExecutionFollower(sse);
    const poll = async () => {
      try {
        const r = await generation.listSessionExecutions(
          { sessionId, limit: 200, includeLogs: true, activeOrFinishedSince: since },
          { ...principal, requestId: `${principal.requestId}-poll` },
        );
        // Oldest first, so events come in the order things happened.
        for (const e of [...r.executions].reverse()) follower.push(e);
      } catch (err) {
        sse.send('error', { sessionId, error: errorText(err) });
      }
    };
    await poll();
    sse.every(interval, poll);
  });

  app.get('/api/executions/active', async (req) => {
    const { limit } = req.query as Infer<typeof ActiveExecutionsQuery>;
    const r = await generation.listActiveExecutions({ limit }, req.principal);
    return { success: true, executions: r.executions.map((e) => executionJson(e, false)), total: r.total, totalIsExact: r.totalIsExact };
  });

  app.get('/api/executions/:executionId', async (req) => {
    const { executionId } = req.params as { executionId: string };
    const e = await generation.getExecution({ executionId, includeLogs: true }, req.principal);
    const result = await jobResult(e, clients.library, req.principal);
    return { success: true, execution: { ...executionJson(e, true), ...(result === undefined ? {} : { result }) } };
  });

  app.post('/api/executions/:executionId/cancel', async (req) => {
    const { executionId } = req.params as { executionId: string };
    const e = await generation.cancelExecution({ executionId }, req.principal);
    return { success: true, execution: executionJson(e, false) };
  });

  app.get('/api/executions/:executionId/stream', async (req, replyObj) => {
    const { executionId } = req.params as { executionId: string };
    const { interval, heartbeat } = req.query as { interval: number; heartbeat: number };
    const principal: Principal = req.principal;
    const first = await generation.getExecution({ executionId, includeLogs: true }, principal); // 404 before streaming
    // An EventSource reconnects after the stream ends; once it has seen the final event, 204 stops it.
    if (req.headers['last-event-id'] === FINAL_EVENT_ID && FINISHED.has(first.status)) return replyObj.status(204).send();
    const sse = new SseStream(req, replyObj, heartbeat, open);
    const follower = new ExecutionFollower(sse, FINAL_EVENT_ID);
    const handle = async (e: Execution) => {
      // A completed job's result goes with `complete` (nothing when it cannot be read: the execution still says it).
      const result = e.status === 'completed' ? await jobResult(e, clients.library, principal).catch(() => undefined) : undefined;
      follower.push(e, result);
      // Let the final event flush before closing.
      if (follower.isDone(executionId)) setImmediate(() => sse.close());
    };
    await handle(first);
    if (sse.closed || follower.isDone(executionId)) return;
    sse.every(interval, async () => {
      try {
        await handle(
          await generation.getExecution({ executionId, includeLogs: true }, { ...principal, requestId: `${principal.requestId}-poll` }),
        );
      } catch (err) {
        sse.send('error', { executionId, error: errorText(err) });
        setImmediate(() => sse.close());
      }
    });
  });
};

export default executionsRoutes;
