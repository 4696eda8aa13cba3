/**
 * The web console (issue 38): its built files (services/console/dist, made by `pnpm install`'s postinstall or the
 * image's console stage) served under /console, and its backend-for-frontend: the session cookie.
 *
 * The console signs in once (POST /console/session: a tenant's API key, or an admin's email and password through
 * the admin login) and gets an opaque session token in an HttpOnly, SameSite=Strict cookie (Secure and `__Host-`
 * prefixed when PUBLIC_BASE_URL is https). The token's sha256 is what tenancy stores (console_sessions for a
 * tenant, admin_sessions for an admin), so every gateway replica knows every session. The page never sees a key or
 * a token: it gets a CSRF token (derived from the session token, which only the cookie holds) and sends it as
 * X-CSRF-Token on every state-changing request. The auth hook (auth.ts) takes the cookie as the tenant's or the
 * admin's credential on the public routes (/api/*, /admin/*) when no other credential is sent.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { adminUserJson } from '@imagegen/operations';
import { AppError, type Config, forbidden, invalidPayload, unauthorized } from '@imagegen/platform';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { API_KEY_PATTERN, sha256Hex } from './auth.js';
import type { GatewayDeps } from './types.js';

/** Where the built console is (services/console/dist); CONSOLE_DIST overrides it (tests of a missing build). */
export const CONSOLE_DIST = fileURLToPath(new URL('../../console/dist', import.meta.url));

export const CONSOLE_CSRF_HEADER = 'x-csrf-token';
const TENANT_TOKEN = /^cons_[A-Za-z0-9_-]{20,200}$/;
const ADMIN_TOKEN = /^adms_[A-Za-z0-9_-]{20,200}$/;
export const CSRF_REFUSED = 'CSRF token missing or invalid';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The cookie's name: `__Host-` prefixed (Secure, Path=/, no Domain) when the console is served over https. */
export function consoleCookieName(config: Pick<Config, 'publicBaseUrl'>): string {
  return secureOrigin(config) ? '__Host-imagegen_console' : 'imagegen_console';
}

const secureOrigin = (config: Pick<Config, 'publicBaseUrl'>) => config.publicBaseUrl.startsWith('https:');

/** The CSRF token of a session: a one-way function of the session token (the page cannot read the cookie). */
export function csrfTokenOf(sessionToken: string): string {
  return createHash('sha256').update(`imagegen-console-csrf\0${sessionToken}`).digest('base64url');
}

function sameSecret(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

/** The console session token a request carries in its cookie, if any (RFC 6265 cookie header). */
export function consoleTokenOf(request: FastifyRequest, cookieName: string): string | undefined {
  const header = request.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() !== cookieName) continue;
    const v = part.slice(eq + 1).trim();
    if (TENANT_TOKEN.test(v) || ADMIN_TOKEN.test(v)) return v;
    return undefined;
  }
  return undefined;
}

export type ConsoleTokenKind = 'tenant' | 'admin';
export const consoleTokenKind = (token: string): ConsoleTokenKind => (token.startsWith('cons_') ? 'tenant' : 'admin');

/**
 * What a request authenticated by the console cookie must also satisfy: not sent from another site (Fetch
 * Metadata; SameSite keeps the cookie from such requests anyway), and, when it changes state, the CSRF header.
 */
export function checkConsoleRequest(request: FastifyRequest, token: string): void {
  const site = request.headers['sec-fetch-site'];
  if (site === 'cross-site') throw forbidden(CSRF_REFUSED);
  if (SAFE_METHODS.has(request.method)) return;
  const raw = request.headers[CONSOLE_CSRF_HEADER];
  const given = Array.isArray(raw) ? raw[0] : raw;
  if (!given || !sameSecret(given, csrfTokenOf(token))) {
    throw new AppError(403, { error: CSRF_REFUSED, details: ['send the X-CSRF-Token header that GET /console/session answers'] });
  }
}

function hostOf(origin: string): string | undefined {
  try {
    return new URL(origin).host;
  } catch {
    return undefined;
  }
}

export function sessionCookie(config: Pick<Config, 'publicBaseUrl'>, value: string, maxAgeS: number): string {
  const parts = [`${consoleCookieName(config)}=${value}`, 'Path=/', 'HttpOnly', 'SameSite=Strict', `Max-Age=${maxAgeS}`];
  if (secureOrigin(config)) parts.push('Secure');
  return parts.join('; ');
}

// ---- the built files ----

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};

interface ConsoleFile {
  body: Buffer;
  gzip?: Buffer;
  type: string;
  etag: string;
  immutable: boolean;
}

/** Every file of the build, kept in memory (the whole console is some hundred kB), gzipped once where it pays. */
export function loadConsoleFiles(dir: string): Map<string, ConsoleFile> | undefined {
  if (!existsSync(join(dir, 'index.html'))) return undefined;
  const files = new Map<string, ConsoleFile>();
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else {
        const rel = relative(dir, p).split(sep).join('/');
        const body = readFileSync(p);
        const type = TYPES[extname(p)] ?? 'application/octet-stream';
        const compressible = /^(text\/|application\/json|image\/svg)/.test(type) && body.length > 1024;
        files.set(rel, {
          body,
          gzip: compressible ? gzipSync(body, { level: 9 }) : undefined,
          type,
          etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
          // Vite names what it builds under assets/ by content hash.
          immutable: rel.startsWith('assets/'),
        });
      }
    }
  };
  walk(dir);
  return files;
}

/** The console's Content-Security-Policy: no inline script, never framed; images also from the storage's origin. */
export function consoleCsp(config: Config): string {
  const origins = new Set<string>();
  for (const u of [config.publicBaseUrl, config.s3?.publicUrl, config.s3?.endPoint]) {
    if (!u) continue;
    try {
      origins.add(new URL(u).origin);
    } catch {
      // not a URL: nothing to allow
    }
  }
  const img = ["'self'", 'data:', 'blob:', ...origins].join(' ');
  return (
    "default-src 'self'; script-src 'self'; script-src-attr 'none'; style-src 'self'; " +
    `img-src ${img}; connect-src 'self'; font-src 'self'; form-action 'self'; ` +
    "frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
  );
}

const NOT_BUILT = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Console not built</title></head>
<body><h1>The web console is not built</h1><p>Run <code>npx -y pnpm@10 install</code> (its postinstall builds
services/console) and start again.</p></body></html>`;

function sendFile(request: FastifyRequest, reply: FastifyReply, f: ConsoleFile, csp: string) {
  reply.header('content-type', f.type).header('etag', f.etag).header('vary', 'accept-encoding');
  reply.header('cache-control', f.immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
  if (f.type.startsWith('text/html')) {
    reply.header('content-security-policy', csp).header('x-frame-options', 'DENY').header('referrer-policy', 'same-origin');
  }
  if (request.headers['if-none-match'] === f.etag) return reply.status(304).send();
  const accepts = String(request.headers['accept-encoding'] ?? '');
  if (f.gzip && /\bgzip\b/.test(accepts)) return reply.header('content-encoding', 'gzip').send(f.gzip);
  return reply.send(f.body);
}

// ---- routes ----

interface SignInBody {
  apiKey?: unknown;
  email?: unknown;
  password?: unknown;
}

/** The sign-in body: exactly an API key, or an email and a password (SPEC's {error, details} on anything else). */
function parseSignIn(body: unknown): { apiKey: string } | { email: string; password: string } {
  const details: string[] = [];
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw invalidPayload(['body must be a JSON object']);
  const b = body as SignInBody;
  for (const k of Object.keys(b)) if (!['apiKey', 'email', 'password'].includes(k)) details.push(`${k} is not a known field`);
  if (b.apiKey !== undefined) {
    if (b.email !== undefined || b.password !== undefined) details.push('send either apiKey, or email and password');
    else if (typeof b.apiKey !== 'string' || b.apiKey.length === 0) details.push('apiKey must be a non-empty string');
    else if (b.apiKey.length > 200) details.push('apiKey must be at most 200 characters');
    if (details.length) throw invalidPayload(details);
    return { apiKey: (b.apiKey as string).trim() };
  }
  if (b.email === undefined && b.password === undefined) details.push('send apiKey, or email and password');
  else {
    if (typeof b.email !== 'string' || b.email.length === 0 || b.email.length > 254) details.push('email must be 1 to 254 characters');
    if (typeof b.password !== 'string' || b.password.length === 0 || b.password.length > 1024)
      details.push('password must be 1 to 1024 characters');
  }
  if (details.length) throw invalidPayload(details);
  return { email: b.email as string, password: b.password as string };
}

export async function registerConsole(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  const { ctx, clients } = deps;
  const config = ctx.config;
  const tenancy = clients.tenancy;
  const files = loadConsoleFiles(process.env.CONSOLE_DIST || CONSOLE_DIST);
  if (!files) ctx.logger.warn({ dir: CONSOLE_DIST }, 'the web console is not built: /console answers how to build it');
  const csp = consoleCsp(config);
  const cookieName = consoleCookieName(config);
  const open = { config: { auth: 'none' as const }, schema: { hide: true } };
  const clearCookie = (reply: FastifyReply) => reply.header('set-cookie', sessionCookie(config, '', 0));
  const meta = (req: FastifyRequest) => {
    const ip = req.headers['cf-connecting-ip'];
    return { ip: (Array.isArray(ip) ? ip[0] : ip) ?? req.ip, userAgent: String(req.headers['user-agent'] ?? '').slice(0, 500) };
  };

  /** Who the cookie signs in (the session answer), or a 401 that also clears the cookie. */
  const sessionOf = async (req: FastifyRequest, reply: FastifyReply) => {
    const token = consoleTokenOf(req, cookieName);
    if (!token) throw unauthorized('Not signed in to the console');
    try {
      const tokenHash = sha256Hex(token);
      const who = { requestId: req.id, source: 'gateway' };
      if (consoleTokenKind(token) === 'tenant') {
        const s = await tenancy.authenticateConsoleSession({ tokenHash }, who);
        return { kind: 'tenant' as const, tenantId: s.tenantId, expiresAt: s.expiresAt, csrfToken: csrfTokenOf(token) };
      }
      const s = await tenancy.authenticateAdminSession({ tokenHash }, who);
      return {
        kind: 'admin' as const,
        admin: { userId: s.userId, email: s.email, role: s.role, displayName: s.displayName },
        expiresAt: s.sessionExpiresAt,
        csrfToken: csrfTokenOf(token),
      };
    } catch (err) {
      if (err instanceof AppError && err.status === 401) clearCookie(reply);
      throw err;
    }
  };

  app.get('/console/session', open, async (req, reply) => {
    reply.header('cache-control', 'no-store');
    return { data: await sessionOf(req, reply) };
  });

  app.post('/console/session', open, async (req, reply) => {
    reply.header('cache-control', 'no-store');
    // A sign-in is accepted from this origin only (a login CSRF would sign the victim in as the attacker).
    if (req.headers['sec-fetch-site'] === 'cross-site') throw forbidden(CSRF_REFUSED);
    const origin = req.headers.origin;
    if (origin !== undefined && hostOf(origin) !== req.headers.host) throw forbidden(CSRF_REFUSED);
    const body = parseSignIn(req.body);
    let token: string;
    let expiresAt: string;
    if ('apiKey' in body) {
      if (!API_KEY_PATTERN.test(body.apiKey)) throw unauthorized();
      const s = await tenancy.createConsoleSession(
        { keyHash: sha256Hex(body.apiKey), ...meta(req) },
        { requestId: req.id, source: 'gateway' },
      );
      token = s.token;
      expiresAt = s.expiresAt;
    } else {
      const s = await tenancy.adminLogin(
        { email: body.email, password: body.password, ...meta(req) },
        { requestId: req.id, source: 'admin' },
      );
      token = s.token;
      expiresAt = s.expiresAt;
      reply.header('set-cookie', sessionCookie(config, token, Math.max(0, Math.floor((Date.parse(expiresAt) - Date.now()) / 1000))));
      return {
        data: { kind: 'admin', admin: { ...adminUserJson(s.user) }, expiresAt, csrfToken: csrfTokenOf(token) },
      };
    }
    reply.header('set-cookie', sessionCookie(config, token, Math.max(0, Math.floor((Date.parse(expiresAt) - Date.now()) / 1000))));
    const s = await tenancy.authenticateConsoleSession({ tokenHash: sha256Hex(token) }, { requestId: req.id, source: 'gateway' });
    return { data: { kind: 'tenant', tenantId: s.tenantId, expiresAt, csrfToken: csrfTokenOf(token) } };
  });

  app.delete('/console/session', open, async (req, reply) => {
    reply.header('cache-control', 'no-store');
    const token = consoleTokenOf(req, cookieName);
    if (!token) {
      clearCookie(reply);
      return { data: { success: true } };
    }
    checkConsoleRequest(req, token);
    const tokenHash = sha256Hex(token);
    const who = { requestId: req.id, source: 'gateway' };
    if (consoleTokenKind(token) === 'tenant') await tenancy.endConsoleSession({ tokenHash }, who);
    else await tenancy.adminLogout({ tokenHash }, who);
    clearCookie(reply);
    return { data: { success: true } };
  });

  const serve = (req: FastifyRequest<{ Params: { '*'?: string } }>, reply: FastifyReply) => {
    if (!files)
      return reply.status(503).header('content-type', 'text/html; charset=utf-8').header('content-security-policy', csp).send(NOT_BUILT);
    const path = (req.params['*'] ?? '').replace(/^\/+/, '');
    const file = files.get(path);
    if (file && path !== 'index.html') return sendFile(req, reply, file, csp);
    // A file the build does not have (any name with an extension: Vite's are all hashed files) is a 404, not the
    // app. A page's path has none, under /console/assets/ too: the saved assets pages (/console/assets/scenes).
    if (/\.[a-z0-9]{1,8}$/i.test(path)) {
      return reply.status(404).send({ error: 'Route not found', details: ['no console file has this name'] });
    }
    // Every other path under /console is a page of the app: its client-side router reads the URL.
    return sendFile(req, reply, files.get('index.html') as ConsoleFile, csp);
  };
  app.get('/console', open, (req, reply) => serve(req as FastifyRequest<{ Params: { '*'?: string } }>, reply));
  app.get('/console/*', open, serve);
}
