import type { Clients } from '@imagegen/operations';
import type { Principal, ServiceContext } from '@imagegen/platform';
import type { FastifyInstance } from 'fastify';
import './operation-policy.js';

export type { RouteAuth } from './operation-policy.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth hook for every authenticated route. */
    principal: Principal;
  }
}

/** What every route module gets: the gateway's context and one gRPC client per service (made once, closed on stop). */
export interface GatewayDeps {
  ctx: ServiceContext;
  clients: Clients;
}

export type RouteModule = (app: FastifyInstance, deps: GatewayDeps) => Promise<void> | void;
