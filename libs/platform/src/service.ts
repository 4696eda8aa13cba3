import type { Logger } from 'pino';
import type { Config, ServiceName } from './config.js';
import type { EventTransport } from './events/index.js';
import type { ObjectStorage } from './storage/index.js';

/**
 * What every service's `start(ctx)` receives. The all-in-one stack builds one context and shares
 * the transport and storage; a standalone process (main.ts) builds its own from the environment.
 */
export interface ServiceContext {
  config: Config;
  logger: Logger;
  events: EventTransport;
  storage: ObjectStorage;
  /** gRPC address (host:port) or HTTP URL of another service; throws when it is not known. */
  resolve(name: ServiceName): string;
}

export interface RunningService {
  /** Stop taking work, finish in-flight work, release resources. */
  stop(): Promise<void>;
  /** Set by services with a gRPC server (host:port). */
  grpcAddress?: string;
  /** Set by services with an HTTP server (base URL). */
  httpUrl?: string;
  /** Readiness: false while a dependency the service needs is down. */
  ready?(): Promise<boolean>;
}

export type StartService = (ctx: ServiceContext) => Promise<RunningService>;

/** Address book filled by the stack as modules start, falling back to the environment. */
export function createResolver(config: Config, known: Partial<Record<ServiceName, string>> = {}) {
  return (name: ServiceName): string => {
    const a = known[name] ?? config.addresses[name];
    if (!a) throw new Error(`address of service "${name}" is not configured (set ${envNameOf(name)})`);
    return a;
  };
}

export function envNameOf(name: ServiceName): string {
  return {
    tenancy: 'TENANCY_ADDR',
    library: 'LIBRARY_ADDR',
    generation: 'GENERATION_ADDR',
    usage: 'USAGE_ADDR',
    webhooks: 'WEBHOOKS_ADDR',
    oauth: 'OAUTH_URL',
    mcp: 'MCP_URL',
  }[name];
}
