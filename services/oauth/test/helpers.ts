import { createHash, randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { AppError, createDb, createLogger, createTestDatabase, freePort, migrate, type Sql } from '@imagegen/platform';
import type { FastifyInstance } from 'fastify';
import { buildOAuthApp } from '../src/app.js';
import { createProvider, type Urls, urlsFor } from '../src/provider.js';
import { loadSecrets } from '../src/secrets.js';

export { freePort };

export const keyFor = (type: 'live' | 'test' = 'live') => `sk_${type}_${randomBytes(24).toString('hex')}`;
export const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

export interface OAuthHarness {
  base: string;
  urls: Urls;
  sql: Sql;
  app: FastifyInstance;
  provider: any;
  tenants: Map<string, { tenantId: string; active: boolean; keys: string[] }>;
  addTenant(tenantId: string, active?: boolean): string;
  stop(): Promise<void>;
}

/** The oauth service's HTTP app on a fresh database, with an in-test tenant directory instead of tenancy. */
export async function startOAuth(): Promise<OAuthHarness> {
  const db = await createTestDatabase(undefined, 'oauth');
  const sql = createDb(db.url, { schema: 'oauth', max: 3 });
  await migrate(sql, 'oauth', fileURLToPath(new URL('../migrations', import.meta.url)));
  const secrets = await loadSecrets(sql);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const urls = urlsFor(base);
  const logger = createLogger('oauth-test', process.env.TEST_LOG_LEVEL ?? 'silent');
  const tenants = new Map<string, { tenantId: string; active: boolean; keys: string[] }>();
  const byHash = new Map<string, string>();
  const getTenant = async (tenantId: string) => {
    const t = tenants.get(tenantId);
    return t ? { tenantId, tenantName: `Tenant ${tenantId}`, isActive: t.active } : undefined;
  };
  const authenticateKey = async (hash: string) => {
    const tenantId = byHash.get(hash);
    if (!tenantId) throw new AppError(401, 'Invalid or missing API key');
    return { tenantId, tenantActive: tenants.get(tenantId)!.active };
  };
  const provider = createProvider({
    sql,
    logger,
    publicBaseUrl: base,
    secrets,
    tenantActive: async (id) => !!(await getTenant(id))?.isActive,
  });
  const app = await buildOAuthApp({
    provider,
    urls,
    logger,
    getTenant,
    signin: { provider, urls, logger, csrfSecret: secrets.csrfSecret, authenticateKey, getTenant },
  });
  await app.listen({ host: '127.0.0.1', port });
  return {
    base,
    urls,
    sql,
    app,
    provider,
    tenants,
    addTenant(tenantId, active = true) {
      const key = keyFor();
      const t = tenants.get(tenantId) ?? { tenantId, active, keys: [] };
      t.keys.push(key);
      t.active = active;
      tenants.set(tenantId, t);
      byHash.set(sha256(key), tenantId);
      return key;
    },
    async stop() {
      await app.close();
      await sql.end({ timeout: 5 });
      await db.drop();
    },
  };
}

/** A tiny cookie jar for driving the browser part of the flow with fetch. */
export class CookieJar {
  private cookies = new Map<string, { value: string; path: string }>();
  store(res: Response) {
    for (const c of res.headers.getSetCookie()) {
      const [pair, ...attrs] = c.split(';');
      const i = pair.indexOf('=');
      const name = pair.slice(0, i).trim();
      const value = pair.slice(i + 1).trim();
      const path =
        attrs
          .map((a) => a.trim())
          .find((a) => a.toLowerCase().startsWith('path='))
          ?.slice(5) ?? '/';
      const expired = attrs.some((a) => /^expires=thu, 01 jan 1970/i.test(a.trim())) || value === '';
      if (expired) this.cookies.delete(`${name}|${path}`);
      else this.cookies.set(`${name}|${path}`, { value, path });
    }
  }
  header(url: string): string {
    const p = new URL(url).pathname;
    return [...this.cookies.entries()]
      .filter(([, c]) => p.startsWith(c.path))
      .map(([k, c]) => `${k.split('|')[0]}=${c.value}`)
      .join('; ');
  }
  async fetch(url: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    const cookie = this.header(url);
    if (cookie) headers.set('cookie', cookie);
    const res = await fetch(url, { ...init, headers, redirect: 'manual' });
    this.store(res);
    return res;
  }
}

export function pkce() {
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  return { verifier, challenge };
}
