/**
 * One error type for every service. `status` is the HTTP status of SPEC section 7 and `body` is the
 * exact response body ({error, details?, ...}). gRPC carries it across services (see grpc.ts) and the
 * gateway writes it out unchanged.
 */
export interface ErrorBody {
  error: string;
  details?: unknown;
  [extra: string]: unknown;
}

export class AppError extends Error {
  readonly status: number;
  readonly body: ErrorBody;
  /** Extra HTTP headers the gateway must send (e.g. Retry-After). */
  readonly headers: Record<string, string>;

  constructor(status: number, body: ErrorBody | string, headers: Record<string, string> = {}) {
    const b = typeof body === 'string' ? { error: body } : body;
    super(b.error);
    this.name = 'AppError';
    this.status = status;
    this.body = b;
    this.headers = headers;
  }
}

export const badRequest = (error: string, details?: unknown) => new AppError(400, details === undefined ? { error } : { error, details });
export const invalidPayload = (details: string[]) => badRequest('Invalid request payload', details);
export const unauthorized = (error = 'Invalid or missing API key') => new AppError(401, { error });
export const forbidden = (error: string) => new AppError(403, { error });
export const notFound = (error: string) => new AppError(404, { error });
export const conflict = (error: string, details?: unknown) => new AppError(409, details === undefined ? { error } : { error, details });
export const quotaExceeded = () => new AppError(402, { error: 'Monthly storage quota exceeded', code: 'QUOTA_EXCEEDED' });

export function isAppError(e: unknown): e is AppError {
  return e instanceof AppError;
}

/** Seconds a client is asked to wait when a dependency (the database) is unreachable. */
export const DEPENDENCY_RETRY_AFTER_S = 2;

/** 503 `Service temporarily unavailable` with Retry-After: what a request gets while a dependency is down. */
export const dependencyUnavailable = (retryAfterS = DEPENDENCY_RETRY_AFTER_S) =>
  new AppError(503, { error: 'Service temporarily unavailable' }, { 'retry-after': String(retryAfterS) });

/**
 * Error codes that mean "the database (or the connection to it) is not there", not "this request is wrong":
 * socket errors, postgres.js connection errors, and SQLSTATEs of class 08 (connection exception) and 57P01-57P05
 * (admin/crash shutdown, cannot connect now, database dropped, idle session timeout).
 */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
]);

/** True for an error raised because the database (or another dependency's socket) is unreachable. */
export function isUnavailableError(err: unknown): boolean {
  return hasCode(err, (code) => UNAVAILABLE_CODES.has(code) || /^08[0-9A-Z]{3}$/.test(code) || /^57P0[1-5]$/.test(code));
}

/**
 * Whether `err`, or every error of an AggregateError (a host with several addresses, every connect refused), or a
 * wrapped cause carries a code that `matches`.
 */
function hasCode(err: unknown, matches: (code: string) => boolean, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 3) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && matches(code)) return true;
  const inner = (err as { errors?: unknown }).errors;
  if (Array.isArray(inner) && inner.length > 0 && inner.every((e) => hasCode(e, matches, depth + 1))) return true;
  return hasCode((err as { cause?: unknown }).cause, matches, depth + 1);
}

/**
 * Failures that prove a statement never reached the server, so it cannot have been applied: the connection it was
 * queued on was never made (refused, no route, the connect timeout, the pool already ended) or the server refused
 * the session before any statement (57P03 cannot connect now, 53300 too many connections). A connection lost after
 * the statement went out (CONNECTION_CLOSED, ECONNRESET, a FATAL 57P01 of a fast shutdown) is not: the statement
 * may have committed with only its answer lost.
 */
const NEVER_SENT_CODES = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'CONNECT_TIMEOUT',
  'CONNECTION_ENDED',
  '57P03',
  '53300',
]);

/** True when `err` proves the statement was never sent (see NEVER_SENT_CODES); false when it may have been applied. */
export function neverReachedServer(err: unknown): boolean {
  return hasCode(err, (code) => NEVER_SENT_CODES.has(code));
}

/**
 * The one mapping of unexpected errors (platform-wide, used by every gRPC handler): an AppError stays as it is,
 * an unreachable database becomes 503 with Retry-After, anything else is undefined (the caller's 500).
 */
export function knownAppError(err: unknown): AppError | undefined {
  if (err instanceof AppError) return err;
  if (isUnavailableError(err)) return dependencyUnavailable();
  return undefined;
}

/** The part of a Fastify instance refuseWhileClosing needs (libs/platform does not depend on Fastify). */
interface ClosingApp {
  addHook(name: 'preClose', hook: (done: () => void) => void): unknown;
  addHook(
    name: 'onRequest',
    hook: (
      req: unknown,
      reply: {
        header(name: string, value: string): unknown;
        code(n: number): { headers(h: Record<string, string>): { send(b: unknown): unknown } };
      },
      done: (err?: Error) => void,
    ) => void,
  ): unknown;
}

/**
 * Draining (SIGTERM, a rolling deploy) for an HTTP server behind a Service: a request that still arrives on an
 * open keep-alive connection once close() began gets the dependency 503 with Retry-After and Connection: close,
 * before any other work (nothing done; the client retries, on a new connection that reaches another pod).
 * Fastify's own answer then (`return503OnClosing`, which the app must set to false) is a bare 503 without
 * Retry-After. `viaErrorHandler`: the 503 goes through the app's error handler (the gateway's adds the request id
 * and its own envelope handling); otherwise it is written here.
 */
export function refuseWhileClosing(app: ClosingApp, opts: { viaErrorHandler?: boolean } = {}): void {
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onRequest', (_req, reply, done) => {
    if (!closing) return done();
    const e = dependencyUnavailable();
    reply.header('connection', 'close');
    if (opts.viaErrorHandler) return done(e);
    reply.code(e.status).headers(e.headers).send(e.body);
  });
}
