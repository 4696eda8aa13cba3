import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { ServiceName } from '@imagegen/platform';
import { MODULES, type ModuleName } from '@imagegen/stack/modules.ts';
import { REPO_ROOT } from '../distributed/harness.js';

/**
 * The module graph two ways: as declared (services/stack/src/modules.ts, `dependsOn`) and as the code calls it,
 * read from the sources (test/e2e/module-graph.test.ts compares them; test/e2e/k8s.test.ts checks the
 * NetworkPolicies against the declared graph).
 *
 * A call, in services/<module>/src (tests excluded) and in the workspace libraries those files import from:
 * - `ctx.resolve('<name>')` (the gRPC client's address, `createClient(XServiceService, () => ctx.resolve('x'))`,
 *   or an HTTP URL: oauth, mcp): a call of the module registered as <name>;
 * - `ctx.resolve(<variable>)`: a call of every module whose name is quoted in that file (the gateway's proxy and
 *   health probes: `forward('oauth')`, `['tenancy', 'library', ...]`); such a file without one is a problem;
 * - a function exported by a workspace library (libs/<lib>/src) whose file resolves names, imported by the
 *   module (`createClients` of @imagegen/operations): a call of each of them;
 * - `provABaseUrl` / `provBBaseUrl` read: a call of the sandbox provider (the upstream when they are unset).
 * `createClient(<Area>ServiceService|Definition, () => ctx.resolve('<name>'))` must name the module that serves
 * that gRPC service (a UsageService client resolving 'library' is a problem).
 */

export type Graph = Map<ModuleName, Set<ModuleName>>;

/** Address-book name -> module, from the graph's `registersAs`. */
export const MODULE_OF = new Map<ServiceName, ModuleName>(
  MODULES.filter((m) => m.registersAs).map((m) => [m.registersAs as ServiceName, m.name]),
);

/** gRPC service (ts-proto's `<Name>Service` / `<Name>Definition`, without the suffix) -> the module serving it. */
export const GRPC_SERVICE_MODULE: Record<string, ModuleName> = {
  TenancyService: 'tenancy',
  LibraryService: 'library',
  AssetsService: 'library',
  GenerationService: 'generation',
  UsageService: 'usage-metering',
  WebhookService: 'webhook-dispatcher',
};

export function declaredGraph(): Graph {
  return new Map(MODULES.map((m) => [m.name, new Set(m.dependsOn)]));
}

/** Source without comments (a comment naming `ctx.resolve('x')` is no call); strings and line numbers are kept. */
export function stripComments(src: string): string {
  return src.replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, ' ')).replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');
}

/** `.ts` files under `dir`, test files and test folders excluded. */
export function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== 'test' && e.name !== '__tests__' && e.name !== 'node_modules') out.push(...sourceFiles(p));
    } else if (/\.ts$/.test(e.name) && !/\.(test|spec)\.ts$/.test(e.name) && !e.name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

const SERVICE_NAMES = [...MODULE_OF.keys()];
const QUOTED_NAME = new RegExp(`['"](${SERVICE_NAMES.join('|')})['"]`, 'g');

const lineOf = (src: string, index: number) => src.slice(0, index).split('\n').length;

interface FileCalls {
  /** Module called -> where (file:line). */
  calls: Map<ModuleName, string[]>;
  problems: string[];
}

/** The calls one file makes (see above), by itself. */
export function callsInSource(src: string, where: string): FileCalls {
  const code = stripComments(src);
  const calls = new Map<ModuleName, string[]>();
  const problems: string[] = [];
  const add = (name: string, index: number) => {
    const mod = MODULE_OF.get(name as ServiceName);
    if (!mod) {
      problems.push(`${where}:${lineOf(code, index)}: resolves '${name}', which no module registers as`);
      return;
    }
    calls.set(mod, [...(calls.get(mod) ?? []), `${where}:${lineOf(code, index)}`]);
  };
  for (const m of code.matchAll(/\bctx\.resolve\(\s*(['"])([\w-]+)\1\s*\)/g)) add(m[2], m.index ?? 0);
  const dynamic = [...code.matchAll(/\bctx\.resolve\b(?!\(\s*['"])/g)];
  if (dynamic.length > 0) {
    const named = [...code.matchAll(QUOTED_NAME)];
    if (named.length === 0) {
      problems.push(`${where}:${lineOf(code, dynamic[0].index ?? 0)}: ctx.resolve with a name computed from nothing quoted in this file`);
    }
    for (const n of named) add(n[1], n.index ?? 0);
  }
  for (const m of code.matchAll(/\bprov[AB]BaseUrl\b/g)) {
    calls.set('sandbox-provider', [...(calls.get('sandbox-provider') ?? []), `${where}:${lineOf(code, m.index ?? 0)}`]);
  }
  for (const m of code.matchAll(
    /\bcreateClient\(\s*(\w+?)(?:Service|Definition)\s*,\s*\(\)\s*=>\s*ctx\.resolve\(\s*['"]([\w-]+)['"]\s*\)/g,
  )) {
    const serving = GRPC_SERVICE_MODULE[m[1]];
    const resolved = MODULE_OF.get(m[2] as ServiceName);
    if (serving && resolved && serving !== resolved) {
      problems.push(
        `${where}:${lineOf(code, m.index ?? 0)}: a ${m[1]} client resolves '${m[2]}' (${resolved}), but ${serving} serves ${m[1]}`,
      );
    }
  }
  return { calls, problems };
}

/** Workspace library package name -> its exported names whose file makes calls, with those calls. */
function libraryCalls(): Map<string, Map<string, FileCalls>> {
  const out = new Map<string, Map<string, FileCalls>>();
  const libs = join(REPO_ROOT, 'libs');
  for (const lib of readdirSync(libs)) {
    const pkgFile = join(libs, lib, 'package.json');
    if (!existsSync(pkgFile)) continue;
    const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')).name as string;
    const exported = new Map<string, FileCalls>();
    for (const f of sourceFiles(join(libs, lib, 'src'))) {
      const src = readFileSync(f, 'utf8');
      const fc = callsInSource(src, relative(REPO_ROOT, f));
      if (fc.calls.size === 0 && fc.problems.length === 0) continue;
      for (const m of stripComments(src).matchAll(/^export\s+(?:async\s+)?(?:function\*?|const|let|class)\s+([\w$]+)/gm))
        exported.set(m[1], fc);
    }
    if (exported.size > 0) out.set(pkg, exported);
  }
  return out;
}

/** Names a file imports from each `@imagegen/*` package (any subpath). */
function importedNames(src: string): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const m of stripComments(src).matchAll(/import\s+(?:type\s+)?\{([^}]*)\}\s*from\s*['"](@imagegen\/[\w-]+)(?:\/[^'"]*)?['"]/g)) {
    const names = out.get(m[2]) ?? new Set<string>();
    for (const part of m[1].split(',')) {
      const name = part
        .trim()
        .replace(/^type\s+/, '')
        .split(/\s+as\s+/)[0]
        .trim();
      if (name) names.add(name);
    }
    out.set(m[2], names);
  }
  return out;
}

export interface CodeGraph {
  graph: Graph;
  /** Caller -> callee -> where the code makes the call. */
  evidence: Map<ModuleName, Map<ModuleName, string[]>>;
  problems: string[];
}

/** The calls each module's code makes (services/<module>/src, and the library functions it imports). */
export function codeGraph(): CodeGraph {
  const libs = libraryCalls();
  const graph: Graph = new Map();
  const evidence = new Map<ModuleName, Map<ModuleName, string[]>>();
  const problems: string[] = [];
  for (const { name } of MODULES) {
    const calls = new Map<ModuleName, string[]>();
    const merge = (fc: FileCalls, via?: string) => {
      for (const [to, at] of fc.calls) calls.set(to, [...(calls.get(to) ?? []), ...at.map((a) => (via ? `${a} (via ${via})` : a))]);
      problems.push(...fc.problems);
    };
    for (const f of sourceFiles(join(REPO_ROOT, 'services', name, 'src'))) {
      const src = readFileSync(f, 'utf8');
      const rel = relative(REPO_ROOT, f);
      merge(callsInSource(src, rel));
      for (const [pkg, names] of importedNames(src)) {
        const exported = libs.get(pkg);
        for (const n of names) {
          const fc = exported?.get(n);
          if (fc) merge(fc, `${n} imported by ${rel}`);
        }
      }
    }
    calls.delete(name); // a module calling itself is no edge
    evidence.set(name, calls);
    graph.set(name, new Set(calls.keys()));
  }
  return { graph, evidence, problems: [...new Set(problems)] };
}
