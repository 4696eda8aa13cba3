import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { invalidPayload } from '@imagegen/platform';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';

/**
 * Input no request may carry past the edge (issue 15): NUL characters (PostgreSQL text cannot hold them),
 * lone UTF-16 surrogates (not Unicode; jsonb and the wire encoders refuse them), malformed %-escapes, and
 * JSON nested deeper than MAX_JSON_DEPTH. Each is refused with 400 'Invalid request payload' and a detail
 * naming the field, before any service sees the request. The framework's own refusals (bad URL, over-long
 * path parameter, malformed HTTP) answer in the same {error, details} envelope and never echo the URL.
 */
export const MAX_JSON_DEPTH = 32;
const MAX_DETAILS = 10;
const LABEL_SEGMENT_MAX = 64;

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const isWellFormed: (s: string) => boolean =
  typeof (String.prototype as { isWellFormed?: unknown }).isWellFormed === 'function'
    ? (s) => (s as unknown as { isWellFormed(): boolean }).isWellFormed()
    : (s) => !LONE_SURROGATE.test(s);

/** A field name fit to be shown back: control characters and lone surrogates as '?', long names cut. */
function labelSegment(key: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: replacing control characters is the point
  let s = key.replace(/[\u0000-\u001f\u007f]/g, '?');
  if (!isWellFormed(s)) s = s.replace(new RegExp(LONE_SURROGATE.source, 'g'), '?');
  return s.length > LABEL_SEGMENT_MAX ? `${s.slice(0, LABEL_SEGMENT_MAX)}...` : s;
}

const join = (parent: string, key: string | number) => (parent ? `${parent}.${labelSegment(String(key))}` : labelSegment(String(key)));

/** The problem of one string, or undefined: `field must not contain ...`. */
function stringProblem(field: string, s: string): string | undefined {
  if (s.includes('\u0000')) return `${field} must not contain NUL characters`;
  if (!isWellFormed(s)) return `${field} must not contain unpaired surrogate characters`;
  return undefined;
}

const isPlainContainer = (v: object): boolean => {
  if (Array.isArray(v)) return true;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

/**
 * Problems of a parsed value (a JSON body, the path parameters, the query): strings and property names with
 * NUL or lone surrogates, nesting deeper than MAX_JSON_DEPTH. `root` names the value itself ('body').
 * Stops at MAX_DETAILS problems; never recurses deeper than the limit.
 */
export function valueProblems(value: unknown, root: string, out: string[] = []): string[] {
  const walk = (v: unknown, field: string, depth: number): void => {
    if (out.length >= MAX_DETAILS) return;
    if (typeof v === 'string') {
      const p = stringProblem(field || root, v);
      if (p) out.push(p);
      return;
    }
    if (v === null || typeof v !== 'object' || !isPlainContainer(v)) return;
    if (depth >= MAX_JSON_DEPTH) {
      out.push(`${field || root} is nested too deeply (at most ${MAX_JSON_DEPTH} levels)`);
      return;
    }
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length && out.length < MAX_DETAILS; i++) walk(v[i], join(field, i), depth + 1);
      return;
    }
    for (const [k, child] of Object.entries(v)) {
      if (out.length >= MAX_DETAILS) return;
      const kp = stringProblem(`property names in ${field || root}`, k);
      if (kp) {
        out.push(kp);
        continue;
      }
      walk(child, join(field, k), depth + 1);
    }
  };
  walk(value, '', 0);
  return out;
}

function decodeComponent(s: string): string | undefined {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
}

/**
 * Problems of a raw query string (what follows '?'): malformed %-escapes or escapes that are not UTF-8, NUL
 * characters, in names and values. Checked on the raw text, so proxied routes (whose query is forwarded as
 * sent) are covered as well as parsed ones.
 */
export function queryProblems(rawQuery: string, out: string[] = []): string[] {
  if (rawQuery === '') return out;
  for (const pair of rawQuery.split('&')) {
    if (out.length >= MAX_DETAILS) break;
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const rawName = eq < 0 ? pair : pair.slice(0, eq);
    const rawValue = eq < 0 ? '' : pair.slice(eq + 1);
    const name = decodeComponent(rawName);
    if (name === undefined) {
      out.push('query parameter names must be valid percent-encoded UTF-8');
      continue;
    }
    const np = stringProblem('query parameter names', name);
    if (np) {
      out.push(np);
      continue;
    }
    const value = decodeComponent(rawValue);
    const field = labelSegment(name) || 'query';
    if (value === undefined) {
      out.push(`${field} must be valid percent-encoded UTF-8`);
      continue;
    }
    const vp = stringProblem(field, value);
    if (vp) out.push(vp);
  }
  return out;
}

/** Path parameters (already decoded by the router): NUL and lone surrogates. The wildcard is 'path'. */
export function paramProblems(params: unknown, out: string[] = []): string[] {
  if (params === null || typeof params !== 'object') return out;
  for (const [k, v] of Object.entries(params as Record<string, unknown>)) {
    if (typeof v !== 'string') continue;
    const p = stringProblem(k === '*' ? 'path' : labelSegment(k), v);
    if (p) out.push(p);
  }
  return out;
}

/**
 * Problems of a raw body forwarded unparsed (the proxied OAuth and MCP routes): a JSON body is parsed and
 * walked like any other (text that is not JSON is left to the upstream to refuse), a form body is checked
 * like a query string. Other media types pass unchecked.
 */
export function rawBodyProblems(contentType: string, body: Buffer): string[] {
  const type = contentType.split(';')[0]?.trim().toLowerCase() ?? '';
  if (body.length === 0) return [];
  if (type === 'application/json' || type.endsWith('+json')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      return [];
    }
    return valueProblems(parsed, 'body');
  }
  if (type === 'application/x-www-form-urlencoded') return queryProblems(body.toString('utf8'));
  return [];
}

const isStreamLike = (body: unknown) => body !== null && typeof body === 'object' && !isPlainContainer(body as object);

/**
 * Adds the edge checks: path parameters and the query string in onRequest (before authentication, so an
 * unauthenticated request is refused the same way), bodies in preValidation (after parsing, before the
 * schema check and the handler). Raw request streams (the proxied routes) are left to their upstream.
 */
export function registerInputGuards(app: FastifyInstance): void {
  app.addHook('onRequest', (req: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const problems: string[] = [];
    paramProblems(req.params, problems);
    const q = req.url.indexOf('?');
    if (q >= 0) {
      const hash = req.url.indexOf('#', q);
      queryProblems(req.url.slice(q + 1, hash < 0 ? undefined : hash), problems);
    }
    done(problems.length ? invalidPayload(problems) : undefined);
  });
  app.addHook('preValidation', (req: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const body = req.body;
    if (body === undefined || isStreamLike(body)) return done();
    const problems = valueProblems(body, 'body');
    done(problems.length ? invalidPayload(problems) : undefined);
  });
}

/** fastify's `frameworkErrors`: a malformed URL or an over-long path parameter, in the envelope. */
export function frameworkErrors(error: FastifyError, _req: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-content-type-options', 'nosniff');
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    reply.status(414).send({ error: 'Request URI too long', details: ['a path segment is longer than the limit'] });
    return;
  }
  if (error.code === 'FST_ERR_BAD_URL') {
    reply.status(400).send({ error: 'Invalid request payload', details: ['the path must be valid percent-encoded UTF-8'] });
    return;
  }
  const status = error.statusCode && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 400;
  reply.status(status).send({ error: STATUS_CODES[status] ?? 'Bad Request' });
}

/**
 * `clientErrorHandler`: what Node's HTTP parser refuses (a malformed request line or header, headers too
 * large, a request timeout) in the envelope, as Node itself would answer otherwise (then the socket closes).
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  let status = 400;
  let body: Record<string, unknown> = { error: 'Bad Request', details: ['malformed HTTP request'] };
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    status = 408;
    body = { error: 'Request timeout' };
  } else if (err.code === 'HPE_HEADER_OVERFLOW') {
    status = 431;
    body = { error: 'Request header fields too large' };
  } else if (err.code === 'HPE_URI_TOO_LONG') {
    status = 414;
    body = { error: 'Request URI too long' };
  }
  const text = JSON.stringify(body);
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(text)}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${text}`,
    );
  }
  socket.destroy(err);
}
