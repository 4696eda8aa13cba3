import { MODEL_IDS } from '@imagegen/platform';
import type { RunningStack } from './stack.js';

/**
 * On first start (and whenever it is missing) creates the demo tenant through the admin API and keeps
 * its test key in the local secrets file so every start can print it.
 */
export async function ensureDemoTenant(stack: RunningStack): Promise<{ tenantId: string; testKey: string } | undefined> {
  if (stack.secrets.demoTenant) return stack.secrets.demoTenant;
  const res = await fetch(`${stack.baseUrl}/admin/tenants`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-admin-token': stack.config.adminToken as string },
    body: JSON.stringify({
      tenant_id: 'demo',
      tenant_name: 'Demo tenant',
      contact_email: 'demo@example.com',
      // Keys for the sandbox provider, which accepts any key that is not marked bad.
      provider_credentials: { provA: 'sandbox-provA-key', provB: 'sandbox-provB-key' },
      allowed_models: [...MODEL_IDS],
      api_keys: [{ key_name: 'demo test key', type: 'test' }],
    }),
  });
  if (!res.ok) {
    stack.ctx.logger.warn({ status: res.status, body: await res.text() }, 'could not create the demo tenant');
    return undefined;
  }
  const body = (await res.json()) as { data: { tenant: { tenantId: string }; apiKeys: { apiKey: string; type: string }[] } };
  const testKey = body.data.apiKeys.find((k) => k.type === 'test')?.apiKey ?? body.data.apiKeys[0].apiKey;
  const demo = { tenantId: body.data.tenant.tenantId, testKey };
  stack.secrets.demoTenant = demo;
  await stack.saveSecrets(stack.secrets);
  return demo;
}
