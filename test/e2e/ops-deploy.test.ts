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
    // Health checks hit /readyz where it is served.
    expect(compose.services.gateway.healthcheck.test.join(' ')).toContain(`:${env.PORT}/readyz`);
    expect(compose.services.tenancy.healthcheck.test.join(' ')).toContain(`:${env.OPS_PORT}/readyz`);
  });
});
