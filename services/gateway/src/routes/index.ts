import type { RouteModule } from '../app.js';

/**
 * Every REST route module of the gateway, one per area. Each module owns its paths, JSON schemas
 * and the mapping from HTTP to gRPC calls.
 */
export const routeModules: RouteModule[] = [];
