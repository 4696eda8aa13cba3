import { MODULES, type ModuleName, resolveTargets } from '@imagegen/stack/modules.ts';
import { describe, expect, it } from 'vitest';
import { callsInSource, codeGraph, declaredGraph } from '../support/module-graph.js';
import { readRepoFile } from '../support/repo.js';

/**
 * The module graph (services/stack/src/modules.ts) declares exactly the calls the code makes between modules
 * (test/support/module-graph.ts reads them from the sources): the start order of `--target all`, the README's
 * table and the k8s NetworkPolicies (test/e2e/k8s.test.ts) follow the declared graph, so a call it omits
 * (library -> usage-metering did) is one those miss.
 */

const code = codeGraph();
const declared = declaredGraph();
const edges = (g: Map<ModuleName, Set<ModuleName>>) => [...g].flatMap(([from, tos]) => [...tos].map((to) => `${from} -> ${to}`)).sort();

describe('module graph', () => {
  it('reads the calls from the code without a problem (known names, clients resolving the module that serves them)', () => {
    expect(code.problems).toEqual([]);
  });

  it('declares every call the code makes', () => {
    const missing = [...code.graph].flatMap(([from, tos]) =>
      [...tos]
        .filter((to) => !declared.get(from)?.has(to))
        .map((to) => `${from} -> ${to} (${code.evidence.get(from)?.get(to)?.slice(0, 3).join('; ')})`),
    );
    expect(missing, 'calls missing from dependsOn in services/stack/src/modules.ts').toEqual([]);
  });

  it('declares no dependency the code never calls', () => {
    const unused = [...declared].flatMap(([from, tos]) =>
      [...tos].filter((to) => !code.graph.get(from)?.has(to)).map((to) => `${from} -> ${to}`),
    );
    expect(unused, 'dependsOn entries in services/stack/src/modules.ts no code calls').toEqual([]);
  });

  it('finds the calls a module makes through a library (mcp through createClients of @imagegen/operations) and the known edges', () => {
    const found = edges(code.graph);
    for (const e of [
      'library -> usage-metering',
      'mcp -> generation',
      'mcp -> webhook-dispatcher',
      'gateway -> mcp',
      'generation -> sandbox-provider',
    ]) {
      expect(found).toContain(e);
    }
    expect(code.evidence.get('mcp')?.get('library')?.join(' ')).toMatch(/libs\/operations\/src\/clients\.ts:\d+ \(via createClients/);
  });

  it('the scanner: literal and computed names, comments, clients resolving the wrong module', () => {
    const at = (src: string) => callsInSource(src, 'x.ts');
    expect([...at(`const c = createClient(UsageServiceService, () => ctx.resolve('usage'));`).calls.keys()]).toEqual(['usage-metering']);
    expect(at(`// ctx.resolve('tenancy')\n/* ctx.resolve('library') */ const u = 'http://x';`).calls.size).toBe(0);
    expect([...at(`const f = (s) => ctx.resolve(s); f('oauth');`).calls.keys()]).toEqual(['oauth']);
    expect(at(`const f = (s) => ctx.resolve(s);`).problems).toEqual([expect.stringMatching(/computed from nothing quoted/)]);
    expect(at(`createClient(UsageServiceService, () => ctx.resolve('library'))`).problems).toEqual([
      expect.stringMatching(/UsageService client resolves 'library'/),
    ]);
    expect(at(`ctx.resolve('billing')`).problems).toEqual([expect.stringMatching(/no module registers as/)]);
    expect([...at('const u = ctx.config.provBBaseUrl;').calls.keys()]).toEqual(['sandbox-provider']);
  });

  it('`--target all` starts every module after the modules it calls (no cycle)', () => {
    const order = resolveTargets('all', true).map((m) => m.name);
    expect([...order].sort()).toEqual(MODULES.map((m) => m.name).sort());
    for (const [from, tos] of declared)
      for (const to of tos) expect(order.indexOf(to), `${to} before ${from}`).toBeLessThan(order.indexOf(from));
  });

  it("README's module table lists each module's dependencies as declared", () => {
    const readme = readRepoFile('README.md');
    const section = readme.slice(readme.indexOf('## Module graph and targets'));
    const names = MODULES.map((m) => m.name);
    for (const m of MODULES) {
      const row = section.split('\n').find((l) => new RegExp(`^\\|\\s*${m.name}\\s*\\|`).test(l));
      expect(row, `README row of ${m.name}`).toBeDefined();
      const needs = (row as string).split('|')[2];
      const listed = /every service/.test(needs)
        ? names.filter((n) => n !== m.name && n !== 'sandbox-provider')
        : names.filter((n) => new RegExp(`(^|[\\s,])${n}([\\s,(]|$)`).test(needs.trim()));
      expect(listed.sort(), `README: what ${m.name} needs`).toEqual([...m.dependsOn].sort());
    }
  });
});
