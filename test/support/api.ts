import { MODEL_IDS } from '@imagegen/platform';
import { checkAnswer } from './contract.js';

/** Options of one call: `key` is sent as X-API-Key, `admin` sends the admin token as X-Admin-Token. */
export interface ApiInit {
  method?: string;
  key?: string;
  admin?: boolean;
  body?: unknown;
  headers?: Record<string, string>;
}

/** The answer with its body parsed as JSON (the raw text when it is not JSON, undefined when empty). */
export interface ApiResponse {
  status: number;
  body: any;
  headers: Headers;
}

export type Api = (path: string, init?: ApiInit) => Promise<ApiResponse>;

/**
 * fetch against a gateway with JSON helpers: an object body is sent as JSON (a string as it is) and makes
 * the method POST unless one is given. Every answer is checked against the gateway's OpenAPI document
 * (contract.ts): an answer the document does not declare fails the call.
 */
export function createApi(baseUrl: string, adminToken?: string): Api {
  return async (path, init = {}) => {
    const headers: Record<string, string> = { ...(init.headers ?? {}) };
    if (init.key) headers['x-api-key'] = init.key;
    if (init.admin && adminToken) headers['x-admin-token'] = adminToken;
    let body: string | undefined;
    if (init.body !== undefined) {
      headers['content-type'] ??= 'application/json';
      body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
    }
    const method = init.method ?? (body ? 'POST' : 'GET');
    const res = await fetch(`${baseUrl}${path}`, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {}
    // Every answer must be one the OpenAPI document declares (test/support/contract.ts).
    await checkAnswer(baseUrl, { method: method.toUpperCase(), path, status: res.status, headers: res.headers, body: parsed });
    return { status: res.status, body: parsed as any, headers: res.headers };
  };
}

/** Every model id of SPEC 1 "Models" (tenants created by the tests may use all of them). */
export const ALL_MODELS = [...MODEL_IDS];

export interface TestTenant {
  tenantId: string;
  liveKey: string;
  testKey: string;
  body: any;
}

/**
 * POST /admin/tenants (with the admin token) for `tenantId` with sandbox provider keys and every model,
 * `body` overriding; answers the tenant id and its live and test keys.
 */
export async function createTestTenant(api: Api, tenantId: string, body: Record<string, unknown> = {}): Promise<TestTenant> {
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
}
