/**
 * The tenancy gRPC service: one handler module per area (src/handlers), each validating its requests, calling
 * the repositories (src/repositories, the only SQL) and mapping domain objects to proto messages.
 */
import { adminAuthHandlers } from './handlers/admin-auth.js';
import { adminUserHandlers } from './handlers/admin-users.js';
import { apiKeySigningHandlers } from './handlers/api-key-signing.js';
import { apiKeyHandlers } from './handlers/api-keys.js';
import { auditLogHandlers } from './handlers/audit-log.js';
import { consoleSessionHandlers } from './handlers/console-sessions.js';
import { handlerContext, type TenancyDeps, type TenancyHandlers } from './handlers/context.js';
import { invitationHandlers } from './handlers/invitations.js';
import { tenantDataJobHandlers } from './handlers/tenant-data.js';
import { tenantHandlers } from './handlers/tenants.js';

export { normalizeTenantId, type TenancyDeps } from './handlers/context.js';

export function createHandlers(deps: TenancyDeps): TenancyHandlers {
  const c = handlerContext(deps);
  return {
    ...apiKeyHandlers(c),
    ...apiKeySigningHandlers(c),
    ...tenantHandlers(c),
    ...adminAuthHandlers(c),
    ...adminUserHandlers(c),
    ...invitationHandlers(c),
    ...auditLogHandlers(c),
    ...tenantDataJobHandlers(c),
    ...consoleSessionHandlers(c),
  };
}

export { handlerContext } from './handlers/context.js';
export { sweepExpiredExports, tenancyTenantData } from './handlers/tenant-data.js';
