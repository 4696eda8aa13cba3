import type { RouteModule } from '../app.js';
import opsRoutes from './ops.js';
import charactersRoutes from './characters.js';
import productsRoutes from './products.js';
import scenesRoutes from './scenes.js';
import stylePresetRoutes from './style-presets.js';
import searchPresetRoutes from './search-presets.js';
import imagesRoutes from './images.js';
import sessionsRoutes from './sessions.js';
import filesRoutes from './files.js';
import tenantsRoutes from './tenants.js';
import adminAuthRoutes from './admin-auth.js';
import adminUsersRoutes from './admin-users.js';
import invitationsRoutes from './invitations.js';
import adminStatsRoutes from './admin-stats.js';
import proxyRoutes from './proxy.js';
import generationRoutes from './generation.js';
import executionsRoutes from './executions.js';
import usageRoutes from './usage.js';
import webhookRoutes from './webhooks.js';

/**
 * Every REST route module of the gateway, one per area. Each module owns its paths, JSON schemas
 * and the mapping from HTTP to gRPC calls.
 */
export const routeModules: RouteModule[] = [opsRoutes, charactersRoutes, productsRoutes, scenesRoutes, stylePresetRoutes, searchPresetRoutes, imagesRoutes, sessionsRoutes, filesRoutes, tenantsRoutes, adminAuthRoutes, adminUsersRoutes, invitationsRoutes, adminStatsRoutes, proxyRoutes, generationRoutes, executionsRoutes, usageRoutes, webhookRoutes];
