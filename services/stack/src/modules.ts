import { type Config, ConfigError, type RunningService, type ServiceName, type StartService } from '@imagegen/platform';

/**
 * The module graph (Grafana Mimir style): each service module names every module it calls (gRPC through
 * ctx.resolve, or HTTP: generation calls the sandbox provider when PROVA/PROVB_BASE_URL are unset).
 * test/e2e/module-graph.test.ts fails when the code calls a module not named here, or names one it never
 * calls; the k8s NetworkPolicies admit exactly these edges (test/e2e/k8s.test.ts). Infrastructure (database,
 * events, storage) is set up for any target by startModules (libs/platform/src/standalone.ts).
 * `--target all` starts every module in dependency order and stops them in reverse.
 */
export interface ModuleDef {
  name: ModuleName;
  /** Address-book name the module registers under (gRPC address or HTTP URL). */
  registersAs?: ServiceName;
  dependsOn: ModuleName[];
  load: () => Promise<StartService>;
  /** Called once it started, before the next module starts. */
  started?(running: RunningService, config: Config): void;
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
  {
    name: 'sandbox-provider',
    dependsOn: [],
    load: async () => (await import('@imagegen/sandbox-provider/service')).start,
    started(running, config) {
      // The sandbox speaks both upstream protocols under these prefixes.
      if (!running.httpUrl) return;
      config.provABaseUrl ??= `${running.httpUrl}/provA`;
      config.provBBaseUrl ??= `${running.httpUrl}/provB`;
    },
  },
  { name: 'tenancy', registersAs: 'tenancy', dependsOn: [], load: async () => (await import('@imagegen/tenancy/service')).start },
  {
    name: 'library',
    registersAs: 'library',
    // Upload quota (src/assets/quota.ts: CheckQuota before an asset's image is stored).
    dependsOn: ['usage-metering'],
    load: async () => (await import('@imagegen/library/service')).start,
  },
  {
    name: 'usage-metering',
    registersAs: 'usage',
    dependsOn: ['tenancy'],
    load: async () => (await import('@imagegen/usage-metering/service')).start,
  },
  {
    name: 'generation',
    registersAs: 'generation',
    // sandbox-provider: the upstream when PROVA_BASE_URL / PROVB_BASE_URL are unset (HTTP, not ctx.resolve).
    dependsOn: ['tenancy', 'library', 'usage-metering', 'sandbox-provider'],
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
