import { randomUUID } from 'node:crypto';
import {
  AckPolicy,
  type ConsumerConfig,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
  StorageType,
} from '@nats-io/jetstream';
import { connect, nanos, headers as natsHeaders } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import { DEFAULT_NATS_CONNECT_TIMEOUT_MS, redactUrl, StartupError } from '../config.js';
import { invalidPublishSubject, matchesAny, sanitizeDurable, subjectMatches } from './subjects.js';
import { handleTraced } from './trace.js';
import {
  DEFAULT_RETRY,
  type EventMessage,
  type EventTransport,
  PermanentPublishError,
  type RetryPolicy,
  retryDelay,
  type SubscribeOptions,
  type Subscription,
  TransientPublishError,
} from './types.js';

export interface NatsTransportOptions {
  url: string;
  streamName: string;
  /** The stream captures `${subjectPrefix}.>`. */
  subjectPrefix: string;
  logger: Logger;
  /** Connection name shown by the server (monitoring). */
  name?: string;
  /** How long the stream keeps messages (default 7 days); bounds what a new durable replays. */
  maxAgeMs?: number;
  reconnectTimeWaitMs?: number;
  publishTimeoutMs?: number;
  retry?: RetryPolicy;
  /**
   * Lifetime of one pull request (default 2 s, at least 1 s). A stopping subscription waits for its
   * current pull request to end (at most this long) so that none outlives it; see startConsumer.
   */
  pullExpiresMs?: number;
  /**
   * How long the first connection may take (NATS starting after us): attempts repeat every second, a line is
   * logged every few seconds, and past this the transport gives up with a StartupError naming NATS_URL.
   * Default: NATS_CONNECT_TIMEOUT_MS from the environment, else 60 s.
   */
  connectTimeoutMs?: number;
  /** Interval of the 'waiting for NATS' lines (default 5 s). */
  connectLogEveryMs?: number;
}

/** Messages asked for per pull request. */
const PULL_BATCH = 10;
const DEFAULT_PULL_EXPIRES_MS = 2000;

/** Headers the transport adds itself; stripped on delivery so handlers see what was published. */
const EVENT_ID = 'event-id';
const isInternalHeader = (k: string) => k === EVENT_ID || /^nats-/i.test(k);

/** NATS_CONNECT_TIMEOUT_MS as loadConfig validates it (a whole number of ms); anything else: the default. */
function connectTimeoutFromEnv(): number {
  const v = process.env.NATS_CONNECT_TIMEOUT_MS?.trim();
  return v && /^\d+$/.test(v) ? Number(v) : DEFAULT_NATS_CONNECT_TIMEOUT_MS;
}

/** Why a connection attempt failed, in a few words (never a stack). */
function connectCause(err: unknown): string {
  const e = err as { message?: string; code?: string; cause?: { code?: string; message?: string } };
  const code = e?.cause?.code ?? e?.code;
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  if (code === 'ETIMEDOUT') return 'connection timed out';
  return String(e?.message ?? err).split('\n')[0];
}

/**
 * The first connection. Not `waitOnFirstConnect` (which waits silently and forever): attempts every second,
 * a warning every few seconds saying what it waits for and how long it still will, and past the deadline a
 * StartupError (one line naming NATS_URL and the cause). Refused credentials end it at once: waiting would
 * not help. Once connected, the client reconnects by itself forever (maxReconnectAttempts -1).
 */
async function connectWaiting(opts: NatsTransportOptions, log: Logger) {
  const deadlineMs = opts.connectTimeoutMs ?? connectTimeoutFromEnv();
  const logEveryMs = opts.connectLogEveryMs ?? 5000;
  const where = redactUrl(opts.url);
  const started = Date.now();
  let lastLog = 0;
  for (let attempt = 1; ; attempt++) {
    const left = deadlineMs - (Date.now() - started);
    try {
      const nc = await connect({
        servers: opts.url,
        name: opts.name,
        maxReconnectAttempts: -1,
        reconnectTimeWait: opts.reconnectTimeWaitMs ?? 1000,
        timeout: Math.max(1000, Math.min(5000, left)),
      });
      if (attempt > 1) log.info({ url: where, waitedMs: Date.now() - started }, `connected to NATS at ${where}`);
      return nc;
    } catch (err) {
      const cause = connectCause(err);
      const name = (err as Error)?.name;
      if (name === 'AuthorizationError' || name === 'UserAuthenticationExpiredError') {
        throw new StartupError(`NATS at ${where} (NATS_URL) refused the credentials: ${cause}`, 'NATS_AUTH');
      }
      const waited = Date.now() - started;
      if (waited >= deadlineMs) {
        throw new StartupError(
          `NATS at ${where} (NATS_URL) unreachable (${cause}); gave up after ${Math.round(waited / 1000)} s (NATS_CONNECT_TIMEOUT_MS=${deadlineMs})`,
          'NATS_UNREACHABLE',
        );
      }
      if (lastLog === 0 || Date.now() - lastLog >= logEveryMs) {
        lastLog = Date.now();
        const giveUpInS = Math.ceil((deadlineMs - waited) / 1000);
        log.warn(
          { url: where, cause, waitedMs: waited, giveUpInMs: deadlineMs - waited },
          `waiting for NATS at ${where} (NATS_URL): ${cause}; retrying every second, giving up in ${giveUpInS} s (NATS_CONNECT_TIMEOUT_MS)`,
        );
      }
      await new Promise((r) => setTimeout(r, Math.min(1000, Math.max(0, deadlineMs - waited))));
    }
  }
}

export async function createNatsTransport(opts: NatsTransportOptions): Promise<EventTransport> {
  const log = opts.logger.child({ transport: 'nats', stream: opts.streamName });
  const retry = opts.retry ?? DEFAULT_RETRY;
  const instanceId = randomUUID().slice(0, 8);
  const nc = await connectWaiting(opts, log);
  let connected = true;
  /** Set below, once the stream check exists: a reconnect may find the stream re-created. */
  let onReconnect = () => {};
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') {
        connected = false;
        log.warn({ server: s.server }, 'nats disconnected');
      } else if (s.type === 'reconnect') {
        connected = true;
        log.info({ server: s.server }, 'nats reconnected');
        onReconnect();
      } else if (s.type === 'close') {
        connected = false;
      }
    }
  })().catch(() => {});

  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  /**
   * The stream's creation time as first seen: when it changes, the stream was re-created (a node restarted
   * with an empty store, or it was deleted) and whatever it held is gone: onStreamReset listeners are told.
   */
  let streamCreated: string | undefined;
  const resetListeners = new Set<() => void>();
  const ensure = async () => {
    const created = await ensureStream(jsm, opts, log);
    if (streamCreated !== undefined && created !== streamCreated) {
      log.warn(
        { was: streamCreated, now: created },
        'the stream was re-created: its stored events are gone; publishers re-send recent ones',
      );
      for (const l of resetListeners) l();
    }
    streamCreated = created;
  };
  let checking: Promise<void> | undefined;
  const checkStream = () => {
    checking ??= ensure().finally(() => {
      checking = undefined;
    });
    return checking;
  };
  await ensure();
  onReconnect = () => {
    checkStream().catch((err) => log.warn({ err }, 'checking the stream after a reconnect failed'));
  };
  let lastEnsure = 0;
  /** A publish into our own prefix found no stream: it was deleted (or JetStream restarts); re-create it. */
  const ensureSoon = () => {
    if (Date.now() - lastEnsure < 5000) return;
    lastEnsure = Date.now();
    checkStream().catch((err) => log.warn({ err }, 're-creating the stream failed'));
  };

  // Several filter subjects per consumer need server 2.10; older servers get a
  // stream-wide filter and the client drops what does not match.
  const [major = 0, minor = 0] = (nc.info?.version ?? '0.0').split('.').map(Number);
  const multiFilter = major > 2 || (major === 2 && minor >= 10);

  const subs = new Set<Subscription>();
  let closed = false;

  return {
    kind: 'nats',

    async publish(msg) {
      const invalid = invalidPublishSubject(msg.subject);
      if (invalid) throw new PermanentPublishError('invalid_subject', `${invalid}: '${msg.subject}'`);
      const h = natsHeaders();
      for (const [k, v] of Object.entries(msg.headers)) h.set(k, v);
      h.set(EVENT_ID, msg.id);
      try {
        // msgID = event id: the stream's duplicate window drops re-publishes (relay retries).
        await js.publish(msg.subject, msg.data, { msgID: msg.id, headers: h, timeout: opts.publishTimeoutMs ?? 5000 });
      } catch (err) {
        throw classifyNatsPublishError(err, msg.subject, opts.subjectPrefix, ensureSoon);
      }
    },

    async subscribe(o) {
      if (closed) throw new Error('transport closed');
      const sub = await startConsumer(
        {
          js,
          jsm,
          ensure: checkStream,
          log,
          streamName: opts.streamName,
          prefix: opts.subjectPrefix,
          multiFilter,
          retry,
          pullExpiresMs: Math.max(1000, opts.pullExpiresMs ?? DEFAULT_PULL_EXPIRES_MS),
          instanceId,
        },
        o,
      );
      subs.add(sub);
      return {
        async stop() {
          subs.delete(sub);
          await sub.stop();
        },
      };
    },

    healthy: () => connected && !nc.isClosed(),

    onStreamReset(listener) {
      resetListeners.add(listener);
      return () => resetListeners.delete(listener);
    },

    async close() {
      closed = true;
      await Promise.allSettled([...subs].map((s) => s.stop()));
      subs.clear();
      if (!nc.isClosed()) await nc.drain().catch(() => nc.close());
    },
  };
}

/**
 * Tells the outbox relay whether retrying can help (types.ts classifyPublishError): the client's
 * max_payload check (payload + headers) and a stream's max_msg_size are permanent, as is a subject no
 * stream of ours captures (JetStream answers "no responders"); "no responders" inside our own prefix
 * means the stream is gone for now (deleted, JetStream restarting): transient, and we re-create it.
 * Timeouts and connection errors are transient; anything else is left unclassified.
 */
function classifyNatsPublishError(err: unknown, subject: string, prefix: string, ensureSoon: () => void): unknown {
  // By name, not instanceof: the NATS client packages may be loaded twice (two import paths).
  const name = err instanceof Error ? err.name : '';
  const message = (err as Error)?.message ?? String(err);
  if (name === 'InvalidArgumentError' && /max_payload/.test(message)) {
    return new PermanentPublishError('payload_too_large', `payload exceeds the server's max_payload: ${message}`, { cause: err });
  }
  if (err instanceof JetStreamApiError && err.code === 10054 /* message size exceeds maximum allowed */) {
    return new PermanentPublishError('payload_too_large', message, { cause: err });
  }
  if (name === 'InvalidSubjectError') return new PermanentPublishError('invalid_subject', message, { cause: err });
  const noResponders = name === 'JetStreamNotEnabled' && /no responders/.test(String(((err as Error).cause as Error)?.message));
  if (noResponders) {
    if (!subjectMatches(`${prefix}.>`, subject)) {
      return new PermanentPublishError('no_stream', `no stream captures '${subject}' (the stream takes '${prefix}.>')`, { cause: err });
    }
    ensureSoon();
    return new TransientPublishError(`no stream answered for '${subject}' (stream missing?)`, { cause: err });
  }
  if (['TimeoutError', 'ConnectionError', 'ClosedConnectionError', 'DrainingConnectionError', 'RequestError'].includes(name)) {
    return new TransientPublishError(message, { cause: err });
  }
  return err;
}

/** Creates or updates the stream; answers its creation time (it changes when the stream is re-created). */
async function ensureStream(jsm: JetStreamManager, opts: NatsTransportOptions, log: Logger): Promise<string> {
  const cfg = {
    subjects: [`${opts.subjectPrefix}.>`],
    duplicate_window: nanos(120_000),
    max_age: nanos(opts.maxAgeMs ?? 7 * 24 * 3_600_000),
  };
  try {
    await jsm.streams.info(opts.streamName);
  } catch (err) {
    if (!(err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound)) throw err;
    try {
      return (await jsm.streams.add({ name: opts.streamName, storage: StorageType.File, ...cfg })).created;
    } catch (addErr) {
      // Another replica may have created it between info and add: fall through to update.
      log.debug({ err: addErr }, 'stream add failed, trying update');
    }
  }
  return (await jsm.streams.update(opts.streamName, cfg)).created;
}

interface ConsumerCtx {
  js: JetStreamClient;
  jsm: JetStreamManager;
  ensure: () => Promise<void>;
  log: Logger;
  streamName: string;
  prefix: string;
  multiFilter: boolean;
  retry: RetryPolicy;
  pullExpiresMs: number;
  /** This transport's own id: the durable suffix of its perInstance subscriptions. */
  instanceId: string;
}

/** A perInstance consumer left behind by a process that died is removed by the server after this long unused. */
const PER_INSTANCE_INACTIVE_MS = 3_600_000;

async function startConsumer(c: ConsumerCtx, o: SubscribeOptions): Promise<Subscription> {
  const durable = sanitizeDurable(o.perInstance ? `${o.durable}-${c.instanceId}` : o.durable);
  const log = c.log.child({ durable });
  const ackWaitMs = o.ackWaitMs ?? 30_000;
  const filter: Partial<ConsumerConfig> =
    o.subjects.length === 1
      ? { filter_subject: o.subjects[0] }
      : c.multiFilter
        ? { filter_subjects: o.subjects }
        : { filter_subject: `${c.prefix}.>` };
  const mutable: Partial<ConsumerConfig> = { ack_wait: nanos(ackWaitMs), max_deliver: o.maxDeliver ?? -1, ...filter };

  const ensureConsumer = async () => {
    try {
      await c.jsm.consumers.add(c.streamName, {
        durable_name: durable,
        ack_policy: AckPolicy.Explicit,
        // A process's own consumer starts with what is published from now on, and goes when it is unused.
        ...(o.perInstance
          ? { deliver_policy: DeliverPolicy.New, inactive_threshold: nanos(PER_INSTANCE_INACTIVE_MS) }
          : { deliver_policy: DeliverPolicy.All }),
        ...mutable,
      });
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound) throw err;
      // Exists with another config (e.g. changed subjects): update what may change, else keep it.
      await c.jsm.consumers.update(c.streamName, durable, mutable).catch((e) => {
        log.warn({ err: e }, 'consumer exists with a different config; using it as is');
      });
    }
  };
  try {
    await ensureConsumer();
  } catch (err) {
    // Connected again, but the stream is not back yet (a node restarted with an empty store and the
    // reconnect check has not re-created it): create it now rather than failing the subscription.
    if (!(err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound)) throw err;
    await recover();
  }

  let stopped = false;
  let wake: (() => void) | undefined;
  /** Delivered to us after stop() began and never handled: handed back once our pull requests ended. */
  const unhandled: JsMsg[] = [];

  const handle = async (m: JsMsg) => {
    const msg = toEventMessage(m);
    if (!matchesAny(o.subjects, msg.subject)) {
      m.ack();
      return;
    }
    // Long handlers keep the message theirs (no redelivery to another replica meanwhile).
    const keepAlive = setInterval(() => m.working(), Math.max(500, ackWaitMs / 2));
    try {
      await handleTraced(durable, msg, o.handler);
      m.ack();
    } catch (err) {
      const n = m.info.deliveryCount;
      const last = o.maxDeliver !== undefined && o.maxDeliver > 0 && n >= o.maxDeliver;
      const delay = retryDelay(n, c.retry);
      log[last ? 'error' : 'warn'](
        { err, subject: msg.subject, id: msg.id, deliveries: n, delay },
        last ? 'event handler failed, giving up' : 'event handler failed, will retry',
      );
      m.nak(delay);
    } finally {
      clearInterval(keepAlive);
    }
  };

  /*
   * A pull request's messages arrive together and are handled one by one; their ack_wait runs from the
   * moment the server sent them. Those still waiting behind a slow handler are kept alive too (working()),
   * else the server would redeliver them meanwhile (to another replica, or to this pull request again):
   * handled twice at once, with delivery counts spent (max_deliver) without any handler having failed.
   */
  const drainBatch = async (batch: AsyncIterable<JsMsg>) => {
    const waiting: JsMsg[] = [];
    let ended = false;
    let failure: unknown;
    let notify: (() => void) | undefined;
    const reader = (async () => {
      try {
        for await (const m of batch) {
          waiting.push(m);
          notify?.();
        }
      } catch (err) {
        failure = err;
      } finally {
        ended = true;
        notify?.();
      }
    })();
    const keepAlive = setInterval(
      () => {
        for (const m of waiting) m.working();
      },
      Math.max(500, ackWaitMs / 2),
    );
    try {
      for (;;) {
        const m = waiting.shift();
        if (m) {
          if (stopped) unhandled.push(m);
          else await handle(m);
          continue;
        }
        if (ended) break;
        await new Promise<void>((r) => {
          notify = r;
          if (waiting.length > 0 || ended) r();
        });
        notify = undefined;
      }
    } finally {
      clearInterval(keepAlive);
    }
    await reader;
    if (failure) throw failure;
  };

  /*
   * One pull request at a time (fetch), each ending by itself: when its batch is filled or it expires.
   * stop() never abandons a pull request: it stops asking for more, lets the current one end while keeping
   * what still arrives unhandled, and only then naks those messages. A pull request abandoned while still
   * open on the server (what closing a consume() iterator does) swallows messages: JetStream hands a nak'ed
   * (redelivery) message to the first waiting request, and when that request has no listener the message
   * stays unacked until ack_wait runs out; the prefetched ones of a stopped consumer came back only then.
   */
  const loop = (async () => {
    while (!stopped) {
      try {
        const consumer = await c.js.consumers.get(c.streamName, durable);
        while (!stopped) {
          const batch = await consumer.fetch({ max_messages: PULL_BATCH, expires: c.pullExpiresMs });
          await drainBatch(batch);
        }
      } catch (err) {
        if (stopped) break;
        log.warn({ err }, 'consume loop failed; retrying');
        await recover().catch((e) => log.debug({ err: e }, 're-creating consumer failed'));
      }
      if (!stopped)
        await new Promise<void>((r) => {
          wake = r;
          setTimeout(r, 1000).unref();
        });
    }
    // No pull request of ours is open any more: the server redelivers these at once, to live requests only.
    for (const m of unhandled.splice(0)) {
      try {
        m.nak();
      } catch (err) {
        log.debug({ err }, 'could not hand back an unhandled message');
      }
    }
  })();

  /** The stream (re-created when gone, a reset announced when it was), then our consumer. */
  async function recover() {
    await c.ensure();
    await ensureConsumer();
  }

  return {
    /** Waits for the in-flight handler and the end of the current pull request (at most pullExpiresMs). */
    async stop() {
      if (stopped) return loop;
      stopped = true;
      wake?.();
      await loop;
      if (o.perInstance) await c.jsm.consumers.delete(c.streamName, durable).catch(() => {});
    },
  };
}

function toEventMessage(m: JsMsg): EventMessage {
  const h: Record<string, string> = {};
  let id = '';
  if (m.headers) {
    for (const [k, vs] of m.headers) {
      if (k === EVENT_ID) id = vs[0] ?? '';
      if (!isInternalHeader(k)) h[k] = vs[0] ?? '';
    }
  }
  return {
    id: id || m.headers?.get('Nats-Msg-Id') || `${m.info.stream}:${m.seq}`,
    subject: m.subject,
    data: m.data,
    headers: h,
    redelivered: m.redelivered,
    deliveryCount: m.info.deliveryCount,
  };
}
