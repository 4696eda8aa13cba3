import { ConfigError, type ServiceName, type StartService } from '@imagegen/platform';

/**
 * The module graph (Grafana Mimir style): each service module names the modules it needs in the same
 * process to be useful. Infrastructure (database, events, storage) is set up by the stack for any target.
 * `--target all` starts every module in dependency order and stops them in reverse.
 */
export interface ModuleDef {
  name: ModuleName;
  /** Address-book name the module registers under (gRPC address or HTTP URL). */
  registersAs?: ServiceName;
  dependsOn: ModuleName[];
  load: () => Promise<StartService>;
}

export type ModuleName =
  | 'sandbox-provider'
  | 'tenancy'
  | 'library'
  | 'usage-metering'
  | 'generation'
  | 'webhook-dispatcher'
  | 'oauth'
  | 'mcp'
  | 'gateway';

export const MODULES: ModuleDef[] = [
  { name: 'sandbox-provider', dependsOn: [], load: async () => (await import('@imagegen/sandbox-provider/service')).start },
  { name: 'tenancy', registersAs: 'tenancy', dependsOn: [], load: async () => (await import('@imagegen/tenancy/service')).start },
  { name: 'library', registersAs: 'library', dependsOn: [], load: async () => (await import('@imagegen/library/service')).start },
  {
    name: 'usage-metering',
    registersAs: 'usage',
    dependsOn: ['tenancy'],
    load: async () => (await import('@imagegen/usage-metering/service')).start,
  },
  {
    name: 'generation',
    registersAs: 'generation',
    dependsOn: ['tenancy', 'library', 'usage-metering'],
    load: async () => (await import('@imagegen/generation/service')).start,
  },
  {
    name: 'webhook-dispatcher',
    registersAs: 'webhooks',
    dependsOn: [],
    load: async () => (await import('@imagegen/webhook-dispatcher/service')).start,
  },
  { name: 'oauth', registersAs: 'oauth', dependsOn: ['tenancy'], load: async () => (await import('@imagegen/oauth/service')).start },
  {
    name: 'mcp',
    registersAs: 'mcp',
    dependsOn: ['tenancy', 'library', 'generation', 'usage-metering', 'webhook-dispatcher', 'oauth'],
    load: async () => (await import('@imagegen/mcp/service')).start,
  },
  {
    name: 'gateway',
    dependsOn: ['tenancy', 'library', 'generation', 'usage-metering', 'webhook-dispatcher', 'oauth', 'mcp'],
    load: async () => (await import('@imagegen/gateway/service')).start,
  },
];

/** Modules to run for a target, in start order: `all`, a module name, or a comma list. */
export function resolveTargets(target: string, withDependencies: boolean): ModuleDef[] {
  const byName = new Map(MODULES.map((m) => [m.name, m]));
  const wanted = target === 'all' ? MODULES.map((m) => m.name) : target.split(',').map((t) => t.trim());
  for (const w of wanted) {
    if (!byName.has(w as ModuleName)) {
      throw new ConfigError(`unknown target "${w}" (--target or TARGET): expected all or one of: ${MODULES.map((m) => m.name).join(', ')}`);
    }
  }
  const ordered: ModuleDef[] = [];
  const visit = (name: ModuleName, path: ModuleName[]) => {
    if (path.includes(name)) throw new Error(`module cycle: ${[...path, name].join(' -> ')}`);
    if (ordered.some((m) => m.name === name)) return;
    const def = byName.get(name) as ModuleDef;
    if (withDependencies) for (const d of def.dependsOn) visit(d, [...path, name]);
    ordered.push(def);
  };
  for (const w of wanted) visit(w as ModuleName, []);
  return ordered;
}
