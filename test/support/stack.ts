import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, createTestDatabase } from '@imagegen/platform';
import { type RunningStack, startStack } from '@imagegen/stack/stack.ts';
import { type Api, createApi, createTestTenant, type TestTenant } from './api.js';
import { freePort } from './processes.js';

export { ALL_MODELS, type TestTenant } from './api.js';
export { freePort } from './processes.js';

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
  api: Api;
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
 * startStack on env.PORT; when another test process took that port between freePort() and listen (files run in
 * parallel), tries again on a new one (startStack stops what it started before it rethrows).
 */
async function startOnFreePort(env: Record<string, string>, logger: ReturnType<typeof createLogger>, mayMove: boolean) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startStack({ env, logger });
    } catch (err) {
      if (!mayMove || attempt >= 5 || (err as NodeJS.ErrnoException)?.code !== 'EADDRINUSE') throw err;
      const port = await freePort();
      env.PORT = String(port);
      env.PUBLIC_BASE_URL = `http://127.0.0.1:${port}`;
    }
  }
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
  const stack = await startOnFreePort(env, logger, !opts.env?.PORT);
  const baseUrl = stack.baseUrl as string;
  const sandbox = stack.modules.find((m) => m.name === 'sandbox-provider');

  const api = createApi(baseUrl, env.ADMIN_TOKEN);

  return {
    baseUrl,
    adminToken: env.ADMIN_TOKEN,
    adminEmail: env.ADMIN_EMAIL,
    adminPassword: env.ADMIN_PASSWORD,
    sandboxUrl: sandbox?.running.httpUrl,
    stack,
    env,
    api,
    createTenant: (body = {}) => createTestTenant(api, `t${++tenantSeq}${randomBytes(3).toString('hex')}`, body),
    async stop() {
      await stack.stop();
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
