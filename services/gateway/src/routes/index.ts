import type { RouteModule } from '../types.js';
import adminAuditLogRoutes from './admin-audit-log.js';
import adminAuthRoutes from './admin-auth.js';
import adminStatsRoutes from './admin-stats.js';
import adminUsersRoutes from './admin-users.js';
import charactersRoutes from './characters.js';
import executionsRoutes from './executions.js';
import filesRoutes from './files.js';
import generationRoutes from './generation.js';
import imagesRoutes from './images.js';
import invitationsRoutes from './invitations.js';
import opsRoutes from './ops.js';
import productsRoutes from './products.js';
import proxyRoutes from './proxy.js';
import scenesRoutes from './scenes.js';
import searchPresetRoutes from './search-presets.js';
import sessionsRoutes from './sessions.js';
import stylePresetRoutes from './style-presets.js';
import tenantDataRoutes from './tenant-data.js';
import tenantsRoutes from './tenants.js';
import usageRoutes from './usage.js';
import webhookRoutes from './webhooks.js';

/**
 * Every REST route module of the gateway, one per area. Each module owns its handlers: the mapping from HTTP to
 * gRPC calls (a catalogued route's request schemas, auth and document entry are the operation catalogue's).
 */
export const routeModules: RouteModule[] = [
  opsRoutes,
  charactersRoutes,
  productsRoutes,
  scenesRoutes,
  stylePresetRoutes,
  searchPresetRoutes,
  imagesRoutes,
  sessionsRoutes,
  filesRoutes,
  tenantsRoutes,
  adminAuthRoutes,
  adminUsersRoutes,
  invitationsRoutes,
  adminStatsRoutes,
  adminAuditLogRoutes,
  proxyRoutes,
  generationRoutes,
  executionsRoutes,
  usageRoutes,
  webhookRoutes,
  tenantDataRoutes,
];
