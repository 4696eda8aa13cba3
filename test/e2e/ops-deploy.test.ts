import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { REPO_ROOT } from '../distributed/harness.js';
import { CODE_ENV, readRepoFile, STANDALONE_SERVICES } from '../support/repo.js';

/**
 * deploy/: the Dockerfile and docker-compose.yml agree with the code (no Docker engine on CI machines,
 * so this checks them statically): every workspace package is installed in the image, the entrypoint
 * runs a real entry with the telemetry preload, compose runs every service with known settings.
 */

const read = readRepoFile;
const SERVICES = STANDALONE_SERVICES;
const KNOWN_ENV = new Set(CODE_ENV);

describe('deploy/Dockerfile', () => {
  const dockerfile = read('deploy/Dockerfile');

  it('is multi-stage, runs as a non-root user, takes TARGET', () => {
    expect(dockerfile.match(/^FROM /gm)?.length).toBeGreaterThanOrEqual(2);
    const users = [...dockerfile.matchAll(/^USER\s+(\S+)/gm)].map((m) => m[1]);
    expect(users.at(-1)).toBeDefined();
    expect(users.at(-1)).not.toMatch(/^(root|0)$/);
    expect(dockerfile).toMatch(/^ARG TARGET=/m);
    expect(dockerfile).toMatch(/TARGET=\$\{TARGET\}/);
    for (const port of ['8080', '50051', '9464']) expect(dockerfile).toMatch(new RegExp(`^EXPOSE .*\\b${port}\\b`, 'm'));
  });

  it('copies the manifest of every workspace package before installing', () => {
    const packages = ['libs', 'services'].flatMap((d) =>
      readdirSync(join(REPO_ROOT, d))
        .filter((p) => existsSync(join(REPO_ROOT, d, p, 'package.json')))
        .map((p) => `${d}/${p}/package.json`),
    );
    packages.push('test/package.json');
    for (const p of packages) expect(dockerfile, p).toContain(`COPY ${p} `);
    expect(dockerfile).toContain('pnpm install --frozen-lockfile');
    // Patched dependencies: the patch files are in the build before the install.
    const workspace = YAML.parse(read('pnpm-workspace.yaml'));
    const patchDirs = new Set(Object.values(workspace.patchedDependencies ?? {}).map((f) => String(f).split('/')[0]));
    for (const d of patchDirs) expect(dockerfile.indexOf(`COPY ${d} `), `COPY ${d}`).toBeGreaterThan(-1);
    for (const d of patchDirs) expect(dockerfile.indexOf(`COPY ${d} `)).toBeLessThan(dockerfile.indexOf('pnpm install --frozen-lockfile'));
    const pnpmPin = JSON.parse(read('package.json')).packageManager.replace('pnpm@', '');
    expect(dockerfile).toContain(`pnpm@${pnpmPin}`);
  });

  it('the entrypoint runs services/$TARGET/src/main.ts (or the stack) with the telemetry preload', () => {
    const entry = read('deploy/entrypoint.sh');
    expect(entry).toContain('services/$target/src/main.ts');
    expect(entry).toContain('services/stack/src/main.ts');
    const preload = /--import (\.\/\S+telemetry-preload\.ts)/.exec(entry)?.[1];
    expect(preload).toBeDefined();
    expect(existsSync(join(REPO_ROOT, preload as string))).toBe(true);
    expect(dockerfile).toContain('deploy/entrypoint.sh');
  });
});

describe('deploy/Dockerfile: production image', () => {
  const dockerfile = read('deploy/Dockerfile');
  /** The stages by name, each with its FROM line and instructions. */
  const stages = dockerfile
    .split(/^(?=FROM )/m)
    .slice(1)
    .map((text) => ({ name: /^FROM \S+(?: AS (\S+))?/.exec(text)?.[1], from: /^FROM (\S+)/.exec(text)?.[1] as string, text }));
  const runtime = stages.at(-1) as (typeof stages)[number];
  /** A stage and the stages it is built FROM. */
  const lineage = (name: string | undefined): string => {
    const st = stages.find((x) => x.name === name);
    return st ? st.text + lineage(st.from) : '';
  };

  it('the runtime stage gets production dependencies only, without the test package', () => {
    const sources = [...runtime.text.matchAll(/^COPY --from=(\S+)/gm)].map((m) => m[1]);
    expect(sources.length).toBeGreaterThan(0);
    for (const src of sources) {
      const built = lineage(src);
      const installs = [...built.matchAll(/pnpm install[^\n]*/g)].map((m) => m[0]);
      for (const i of installs) {
        expect(i, `${src}: ${i}`).toMatch(/--prod\b/);
        expect(i, `${src}: the test package is not installed`).toMatch(/--filter '!@imagegen\/e2e'/);
      }
    }
    expect(runtime.text).not.toMatch(/pnpm install/);
    // The excluded name is the test package's.
    expect(JSON.parse(read('test/package.json')).name).toBe('@imagegen/e2e');
    // tsx (a root devDependency the entrypoint needs) comes pinned to the lockfile's version.
    const root = JSON.parse(read('package.json'));
    if (!root.dependencies?.tsx) {
      expect(dockerfile).toMatch(/tsx@\$\{TSX_VERSION\}/);
      expect(dockerfile).toMatch(/pnpm-lock\.yaml/);
      expect(read('pnpm-lock.yaml')).toMatch(/^ {2}tsx@\d[\d.]*:$/m);
    }
    // The build proves the platform loads with those dependencies.
    expect(lineage(sources.find((x) => stages.some((st) => st.name === x)))).toMatch(/node --import tsx .*libs\/platform\/src\/index\.ts/);
  });

  it('signals reach node: tini as PID 1 in exec form, the entrypoint execs node', () => {
    const ep = /^ENTRYPOINT (.+)$/m.exec(runtime.text)?.[1] as string;
    const argv = JSON.parse(ep);
    expect(argv[0]).toMatch(/tini$/);
    expect(argv).toContain('/usr/local/bin/imagegen-entrypoint');
    expect(read('deploy/entrypoint.sh')).toMatch(/^exec node /m);
    expect(runtime.text).not.toMatch(/^CMD [^[]/m);
  });

  it('no local secrets in the build context', () => {
    const ignore = read('deploy/Dockerfile.dockerignore').split('\n');
    for (const p of ['**/.env', '**/.env.*', '**/*.pem', '**/*.key', '**/node_modules']) expect(ignore, p).toContain(p);
    expect(dockerfile).not.toMatch(/^(ENV|ARG) [^\n]*(PASSWORD|SECRET|TOKEN|CREDENTIALS_KEY|DATABASE_URL)/m);
  });
});

describe('deploy/docker-compose.yml', () => {
  const compose = YAML.parse(read('deploy/docker-compose.yml'), { merge: true });

  it('runs the data services, the collector, a trace viewer and every imagegen service', () => {
    const names = Object.keys(compose.services);
    for (const s of ['postgres', 'nats', 'minio', 'redis', 'otel-collector', 'jaeger', ...SERVICES]) expect(names, s).toContain(s);
    expect(compose.services.nats.command).toContain('-js');
    const otel = read('deploy/otel-collector.yaml');
    expect(otel).toContain('jaeger:4317');
  });

  it('each service container runs its TARGET with settings the code knows, non-root and read-only', () => {
    for (const s of SERVICES) {
      const svc = compose.services[s];
      expect(svc.environment.TARGET, s).toBe(s);
      for (const k of Object.keys(svc.environment)) expect(KNOWN_ENV.has(k), `${s}: unknown env ${k}`).toBe(true);
      expect(svc.read_only, s).toBe(true);
      expect(svc.user).toBe('1000:1000');
      expect(svc.environment.OTEL_EXPORTER_OTLP_ENDPOINT).toBe('http://otel-collector:4318');
      expect(Buffer.from(svc.environment.CREDENTIALS_KEY, 'base64').length).toBe(32);
    }
    // Addresses point at compose services on the ports they listen on.
    const env = compose.services.gateway.environment;
    for (const [k, host] of [
      ['TENANCY_ADDR', 'tenancy'],
      ['LIBRARY_ADDR', 'library'],
      ['GENERATION_ADDR', 'generation'],
      ['USAGE_ADDR', 'usage-metering'],
      ['WEBHOOKS_ADDR', 'webhook-dispatcher'],
    ]) {
      expect(env[k]).toBe(`${host}:${env.GRPC_PORT}`);
    }
    expect(env.OAUTH_URL).toBe(`http://oauth:${env.HTTP_PORT}`);
    expect(env.MCP_URL).toBe(`http://mcp:${env.HTTP_PORT}`);
    expect(env.PROVA_BASE_URL).toBe(`http://sandbox-provider:${env.HTTP_PORT}/provA`);
    expect(compose.services.gateway.ports).toContain(`${env.PORT}:${env.PORT}`);
    // Docker waits long enough for the graceful stop; services holding generation requests get provB's 240 s.
    const seconds = (d: string) => Number(/^(\d+)s$/.exec(d)?.[1]);
    for (const s of SERVICES) {
      const svc = compose.services[s];
      const graceMs = Number(svc.environment.SHUTDOWN_GRACE_MS ?? 10_000) + Number(svc.environment.SHUTDOWN_DRAIN_MS ?? 0);
      expect(seconds(svc.stop_grace_period) * 1000, `${s}: stop_grace_period`).toBeGreaterThan(graceMs);
    }
    for (const s of ['gateway', 'generation', 'mcp']) {
      expect(Number(compose.services[s].environment.SHUTDOWN_GRACE_MS), `${s}: SHUTDOWN_GRACE_MS`).toBeGreaterThanOrEqual(240_000);
    }
    // Health checks hit /readyz where it is served.
    expect(compose.services.gateway.healthcheck.test.join(' ')).toContain(`:${env.PORT}/readyz`);
    expect(compose.services.tenancy.healthcheck.test.join(' ')).toContain(`:${env.OPS_PORT}/readyz`);
  });
});
