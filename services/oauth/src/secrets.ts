import { generateKeyPairSync, randomBytes } from 'node:crypto';
import type { Sql } from '@imagegen/platform';

export interface OAuthSecrets {
  /** Private JWKS used by oidc-provider (ID token signing; access and refresh tokens are opaque). */
  jwks: { keys: Record<string, unknown>[] };
  /** Keys signing the provider's cookies (newest first). */
  cookieKeys: string[];
  /** HMAC key of the sign-in page's CSRF tokens. */
  csrfSecret: string;
}

async function loadOrCreate<T>(sql: Sql, name: string, create: () => T): Promise<T> {
  await sql`INSERT INTO secrets (name, value) VALUES (${name}, ${sql.json(create() as never)}) ON CONFLICT (name) DO NOTHING`;
  const [row] = await sql`SELECT value FROM secrets WHERE name = ${name}`;
  return row.value as T;
}

/**
 * Secrets are generated on first start and stored in the oauth schema, so every replica (and every
 * restart) signs and verifies with the same keys. Concurrent first starts agree through ON CONFLICT.
 */
export async function loadSecrets(sql: Sql): Promise<OAuthSecrets> {
  const jwks = await loadOrCreate(sql, 'jwks', () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const jwk = privateKey.export({ format: 'jwk' }) as Record<string, unknown>;
    return { keys: [{ ...jwk, kid: randomBytes(8).toString('hex'), use: 'sig', alg: 'RS256' }] };
  });
  const cookieKeys = await loadOrCreate(sql, 'cookie_keys', () => [randomBytes(32).toString('base64url')]);
  const csrfSecret = await loadOrCreate(sql, 'csrf_secret', () => randomBytes(32).toString('base64url'));
  return { jwks, cookieKeys, csrfSecret };
}
