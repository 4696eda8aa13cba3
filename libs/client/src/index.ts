import createClient, { type Client, type ClientOptions, type Middleware } from 'openapi-fetch';
import type { components, operations, paths, webhooks } from './schema.js';
import { signingMiddleware } from './signing.js';

export { type SignedParts, signedBytes, signingMiddleware, signRequest } from './signing.js';
/**
 * A typed client of the imagegen REST and admin API, generated from the gateway's OpenAPI document
 * (`pnpm client` regenerates src/schema.ts): every path, parameter, body and answer is typed, errors included.
 *
 *   const api = imagegenClient({ baseUrl: 'http://localhost:8080', apiKey: process.env.IMAGEGEN_KEY });
 *   const { data, error, response } = await api.POST('/api/images', { body: { prompt: 'a red fox in snow' } });
 *
 * With `signingSecret` (an API key that requires signed requests), every request is signed (signing.ts).
 */
export type { components, operations, paths, webhooks };
export type ImagegenClient = Client<paths>;

export interface ImagegenClientOptions extends Omit<ClientOptions, 'headers'> {
  baseUrl: string;
  /** Tenant API key (sk_live_... or sk_test_...), sent as X-API-Key. */
  apiKey?: string;
  /**
   * The API key's signing secret, when the key requires signed requests: every request then carries X-Timestamp and
   * X-Signature (signed after every other middleware ran).
   */
  signingSecret?: string;
  /** Admin session token (Authorization: Bearer) for /admin routes. */
  adminSessionToken?: string;
  /** Legacy admin token (X-Admin-Token). */
  adminToken?: string;
  headers?: Record<string, string>;
  /** Middleware run on every request and response (logging, checks). */
  middleware?: Middleware[];
}

export function imagegenClient(opts: ImagegenClientOptions): ImagegenClient {
  const { apiKey, signingSecret, adminSessionToken, adminToken, headers, middleware, ...rest } = opts;
  const h: Record<string, string> = { ...headers };
  if (apiKey) h['x-api-key'] = apiKey;
  if (adminSessionToken) h.authorization = `Bearer ${adminSessionToken}`;
  if (adminToken) h['x-admin-token'] = adminToken;
  const client = createClient<paths>({ ...rest, headers: h });
  for (const m of middleware ?? []) client.use(m);
  if (signingSecret) client.use(signingMiddleware(signingSecret));
  return client;
}

/** The JSON body of an operation's 200 answer, e.g. `Answer<'/api/images', 'get'>`. */
export type Answer<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends {
  responses: { 200: { content: { 'application/json': infer T } } };
}
  ? T
  : never;
