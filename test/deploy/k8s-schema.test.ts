import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../distributed/harness.js';
import { type K8sObject, kustomize } from '../distributed/kustomize.js';
import { KUBERNETES_VERSION, MODELS_DIR, MODELS_MAJOR, validateAll, validateObject } from './k8s-schema.js';

/**
 * Every object kustomize builds from k8s/ (base, dev and prod) is valid against the Kubernetes API
 * schemas of KUBERNETES_VERSION (kubernetes-models, offline; unknown fields rejected as with
 * `kubectl apply`'s strict field validation), plus what the API server checks beyond the OpenAPI schema
 * for these kinds: resource quantities, DNS-1123 names, requests <= limits, headless gRPC Services.
 */

const BUILDS = ['base', 'overlays/dev', 'overlays/prod'] as const;
const build = (b: string): K8sObject[] => kustomize(join(REPO_ROOT, 'k8s', b));
const GRPC_SERVICES = ['tenancy', 'library', 'generation', 'usage-metering', 'webhook-dispatcher'];

/** k8s.io/apimachinery resource.Quantity syntax. */
const QUANTITY = /^[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$/;
const toBytes = (q: string) => {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(q);
  if (!m) throw new Error(`quantity ${q}`);
  const mult: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return Number(m[1]) * (m[2] ? mult[m[2]] : 1);
};
const toMillicores = (q: string) => (q.endsWith('m') ? Number(q.slice(0, -1)) : Number(q) * 1000);

describe(`k8s manifests against the Kubernetes ${KUBERNETES_VERSION} API schemas`, () => {
  it(`the schemas are those of Kubernetes ${KUBERNETES_VERSION}`, () => {
    const version = JSON.parse(readFileSync(join(MODELS_DIR, 'package.json'), 'utf8')).version as string;
    expect(version.startsWith(MODELS_MAJOR), `kubernetes-models ${version}: update KUBERNETES_VERSION with it`).toBe(true);
  });

  for (const b of BUILDS) {
    it(`${b}: every object is valid (types, enums, required fields, no unknown field)`, async () => {
      const objects = build(b);
      expect(objects.length).toBeGreaterThan(20);
      const invalid = await validateAll(objects);
      expect(invalid, JSON.stringify(invalid, null, 2)).toEqual([]);
      // Kinds present: each one was checked against its own schema.
      const kinds = new Set(objects.map((o) => `${o.apiVersion}/${o.kind}`));
      for (const k of ['apps/v1/Deployment', 'v1/Service', 'autoscaling/v2/HorizontalPodAutoscaler', 'policy/v1/PodDisruptionBudget'])
        expect(kinds.has(k), k).toBe(true);
    });
  }

  it('fails on an invalid field: a typo, a field in the wrong place, a wrong type, an unknown enum value, a missing required field', async () => {
    const objects = build('overlays/prod');
    const dep = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'generation') as K8sObject;
    const svc = objects.find((o) => o.kind === 'Service' && o.metadata.name === 'tenancy') as K8sObject;
    const hpa = objects.find((o) => o.kind === 'HorizontalPodAutoscaler') as K8sObject;
    const pdb = objects.find((o) => o.kind === 'PodDisruptionBudget') as K8sObject;
    const cases: [string, K8sObject, (o: any) => void, RegExp][] = [
      [
        'typo in a container field',
        dep,
        (o) => (o.spec.template.spec.containers[0].imagePullPolcy = 'Always'),
        /imagePullPolcy: unknown field/,
      ],
      ['pod field on the container', dep, (o) => (o.spec.template.spec.containers[0].terminationGracePeriodSeconds = 30), /unknown field/],
      ['replicas as a string', dep, (o) => (o.spec.replicas = '2'), /replicas: must be integer/],
      ['unknown enum value', dep, (o) => (o.spec.template.spec.containers[0].imagePullPolicy = 'Sometimes'), /allowed values/],
      ['missing selector', dep, (o) => delete o.spec.selector, /selector/],
      ['clusterIP as a boolean', svc, (o) => (o.spec.clusterIP = false), /clusterIP: must be string/],
      ['misspelled HPA field', hpa, (o) => (o.spec.maxReplica = 3), /maxReplica: unknown field/],
      ['PDB selector field typo', pdb, (o) => (o.spec.selector.matchLabel = { a: 'b' }), /matchLabel: unknown field/],
      ['probe port of the wrong type', dep, (o) => (o.spec.template.spec.containers[0].readinessProbe.httpGet.port = true), /port/],
    ];
    for (const [label, original, mutate, expected] of cases) {
      const o = structuredClone(original);
      mutate(o);
      const problems = await validateObject(o);
      expect(problems.join('\n'), label).toMatch(expected);
    }
    // The unchanged objects are valid.
    for (const o of [dep, svc, hpa, pdb]) expect(await validateObject(o)).toEqual([]);
  });

  for (const b of BUILDS) {
    it(`${b}: names, quantities, requests <= limits, HPA bounds, PDB, headless gRPC Services`, () => {
      const objects = build(b);
      for (const o of objects) {
        expect(o.metadata.name, `${o.kind} name`).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
        expect(o.metadata.name.length).toBeLessThanOrEqual(63);
      }
      for (const d of objects.filter((o) => o.kind === 'Deployment')) {
        for (const c of d.spec.template.spec.containers) {
          const { requests = {}, limits = {} } = c.resources ?? {};
          for (const [k, v] of Object.entries({ ...requests, ...limits })) expect(String(v), `${d.metadata.name} ${k}`).toMatch(QUANTITY);
          expect(
            requests.cpu && requests.memory && limits.memory,
            `${d.metadata.name}: cpu and memory requests, memory limit`,
          ).toBeTruthy();
          expect(toBytes(requests.memory)).toBeLessThanOrEqual(toBytes(limits.memory));
          if (limits.cpu) expect(toMillicores(requests.cpu)).toBeLessThanOrEqual(toMillicores(limits.cpu));
        }
        // Every Deployment has an HPA and a PDB that fit its replicas (dev's sandbox provider excepted).
        if (d.metadata.name === 'sandbox-provider') continue;
        const hpa = objects.find((o) => o.kind === 'HorizontalPodAutoscaler' && o.spec.scaleTargetRef.name === d.metadata.name);
        expect(hpa, `HPA for ${d.metadata.name}`).toBeDefined();
        expect(hpa?.spec.minReplicas).toBeLessThanOrEqual(hpa?.spec.maxReplicas);
        expect(hpa?.spec.metrics.some((m: any) => m.resource?.name === 'cpu')).toBe(true);
        const pdb = objects.find((o) => o.kind === 'PodDisruptionBudget' && o.metadata.name === d.metadata.name);
        expect(pdb, `PDB for ${d.metadata.name}`).toBeDefined();
        expect(Boolean(pdb?.spec.maxUnavailable) !== Boolean(pdb?.spec.minAvailable), 'PDB: one of maxUnavailable/minAvailable').toBe(true);
      }
      // gRPC Services are headless (clients balance per call over every pod); the address in the
      // ConfigMap names them.
      const cm = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'imagegen-config')?.data ?? {};
      for (const name of GRPC_SERVICES) {
        const svc = objects.find((o) => o.kind === 'Service' && o.metadata.name === name);
        expect(svc?.spec.clusterIP, `${name}: headless`).toBe('None');
        expect(svc?.spec.ports.find((p: any) => p.name === 'grpc')?.appProtocol).toBe('grpc');
      }
      const addr = Object.entries(cm).filter(([k]) => /_ADDR$/.test(k));
      expect(addr.length).toBe(GRPC_SERVICES.length);
      for (const [k, v] of addr) {
        const host = String(v)
          .replace(/^dns:\/\/\//, '')
          .split(':')[0];
        expect(GRPC_SERVICES, `${k}=${v}`).toContain(host);
      }
    });
  }

  it('prod requests fit the sizing in k8s/README.md (from docs/BENCHMARKS.md)', () => {
    const objects = build('overlays/prod');
    const readme = readFileSync(join(REPO_ROOT, 'k8s', 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Resources'));
    expect(section.length, 'k8s/README.md has a Resources section').toBeGreaterThan(100);
    for (const d of objects.filter((o) => o.kind === 'Deployment')) {
      const r = d.spec.template.spec.containers[0].resources;
      const row = section.split('\n').find((l: string) => l.startsWith(`| ${d.metadata.name} `));
      expect(row, `k8s/README.md sizing row for ${d.metadata.name}`).toBeDefined();
      expect(row).toContain(r.requests.cpu);
      expect(row).toContain(r.requests.memory);
      expect(row).toContain(r.limits.memory);
    }
  });
});
