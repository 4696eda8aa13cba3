import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, createTestDatabase } from '@imagegen/platform';
import { type RunningStack, startStack } from '@imagegen/stack/stack.ts';

export const ALL_MODELS = [
  'provA-flash-lite-image',
  'provA-flash-image',
  'provA-pro-image',
  'provB-image-2',
  'provB-image-2.5-flare',
  'provB-image-2.5-sunburst',
];

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

export interface TestTenant {
  tenantId: string;
  liveKey: string;
  testKey: string;
  body: any;
}

export interface TestStack {
  baseUrl: string;
  adminToken: string;
  adminEmail: string;
  adminPassword: string;
  /** Base URL of the in-process sandbox upstream (provA at /provA, provB at /provB). */
  sandboxUrl?: string;
  stack: RunningStack;
  env: Record<string, string>;
  createTenant(body?: Record<string, unknown>): Promise<TestTenant>;
  /** fetch against the gateway with JSON helpers. */
  api(
    path: string,
    init?: { method?: string; key?: string; admin?: boolean; body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; body: any; headers: Headers }>;
  stop(): Promise<void>;
}

let tenantSeq = 0;

/**
 * Settings a test file or benchmark may also set in this process's environment (e.g. RATE_LIMIT_DISABLED=1
 * before startTestStack()): they are copied into the stack's env, where loadConfig reads them; opts.env wins.
 * Nothing else of process.env reaches the stack.
 */
const PASSED_THROUGH =
  /^(RATE_LIMIT_[A-Z_]+|WEBHOOK_(TIMEOUT|POLL|RETRY_BASE|RETRY_MAX)_MS|WEBHOOK_MAX_ATTEMPTS|PROVIDER_BREAKER_[A-Z_]+|PROV[AB]_TIMEOUT_MS|UPLOAD_FETCH_TIMEOUT_MS|USAGE_[A-Z_]+|GRPC_DEADLINE_MS|LOG_REQUESTS)$/;

export function passedThroughEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && PASSED_THROUGH.test(k)) out[k] = v;
  return out;
}

/**
 * The whole stack in this process on a fresh database of the machine's PostgreSQL, files in a temp dir,
 * the sandbox provider, in-process events (or JetStream with `nats: true`, isolated by EVENTS_PREFIX).
 */
export async function startTestStack(opts: { env?: Record<string, string>; nats?: boolean } = {}): Promise<TestStack> {
  const db = await createTestDatabase(undefined, 'e2e');
  const dataDir = mkdtempSync(join(tmpdir(), 'imagegen-e2e-'));
  const port = await freePort();
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    PORT: String(port),
    HOST: '127.0.0.1',
    PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
    ADMIN_TOKEN: `adm_${randomBytes(16).toString('hex')}`,
    ADMIN_EMAIL: 'root@example.com',
    ADMIN_PASSWORD: 'correct horse battery staple',
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ALLOW_LOOPBACK_FETCH: '1',
    EVENTS_PREFIX: `e2e${randomBytes(4).toString('hex')}`,
    DB_POOL_MAX: '2',
    ...(opts.nats ? { NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222' } : {}),
    ...passedThroughEnv(),
    ...opts.env,
  };
  const logger = createLogger('e2e', env.LOG_LEVEL);
  const stack = await startStack({ env, logger });
  const baseUrl = stack.baseUrl as string;
  const sandbox = stack.modules.find((m) => m.name === 'sandbox-provider');

  const api: TestStack['api'] = async (path, init = {}) => {
    const headers: Record<string, string> = { ...(init.headers ?? {}) };
    if (init.key) headers['x-api-key'] = init.key;
    if (init.admin) headers['x-admin-token'] = env.ADMIN_TOKEN;
    let body: string | undefined;
    if (init.body !== undefined) {
      headers['content-type'] ??= 'application/json';
      body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
    }
    const res = await fetch(`${baseUrl}${path}`, { method: init.method ?? (body ? 'POST' : 'GET'), headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {}
    return { status: res.status, body: parsed as any, headers: res.headers };
  };

  return {
    baseUrl,
    adminToken: env.ADMIN_TOKEN,
    adminEmail: env.ADMIN_EMAIL,
    adminPassword: env.ADMIN_PASSWORD,
    sandboxUrl: sandbox?.running.httpUrl,
    stack,
    env,
    api,
    async createTenant(body = {}) {
      const tenantId = `t${++tenantSeq}${randomBytes(3).toString('hex')}`;
      const res = await api('/admin/tenants', {
        admin: true,
        body: {
          tenant_id: tenantId,
          tenant_name: `Tenant ${tenantId}`,
          contact_email: `${tenantId}@example.com`,
          provider_credentials: { provA: 'sandbox-key-a1', provB: 'sandbox-key-b1' },
          allowed_models: ALL_MODELS,
          ...body,
        },
      });
      if (res.status !== 200) throw new Error(`createTenant failed: ${res.status} ${JSON.stringify(res.body)}`);
      const keys = res.body.data.apiKeys as { apiKey: string; type: string }[];
      return {
        tenantId: res.body.data.tenant.tenantId,
        liveKey: keys.find((k) => k.type === 'live')?.apiKey as string,
        testKey: keys.find((k) => k.type === 'test')?.apiKey as string,
        body: res.body,
      };
    },
    async stop() {
      await stack.stop();
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
