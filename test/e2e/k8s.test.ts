import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../distributed/harness.js';
import { type K8sObject, kustomize, parseYamlDocs } from '../distributed/kustomize.js';
import { declaredGraph } from '../support/module-graph.js';
import { CODE_ENV, readRepoFile, STANDALONE_SERVICES } from '../support/repo.js';

/**
 * Every manifest under k8s/ parses, the base and each overlay build (kustomization resources,
 * generators and patches resolved here), and every service has a Deployment and a Service whose probes
 * hit the paths the code serves, on ports that match the configuration the code reads.
 */

const K8S = join(REPO_ROOT, 'k8s');
const read = readRepoFile;
const SERVICES = STANDALONE_SERVICES;
const DEV_ONLY = new Set(['sandbox-provider']);
/** Stateless services get an HPA and a PodDisruptionBudget. */
const STATELESS = SERVICES.filter((s) => !DEV_ONLY.has(s));

/** Environment names the code reads, plus POD_NAME (the pod's name from the downward API, which the manifests set). */
const KNOWN_ENV = new Set([...CODE_ENV, 'POD_NAME']);

function allManifestFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...allManifestFiles(p));
    else if (/\.ya?ml$/.test(e.name)) out.push(p);
  }
  return out;
}

function serviceSource(name: string): string {
  const dir = join(REPO_ROOT, 'services', name, 'src');
  const files: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else if (e.name.endsWith('.ts')) files.push(join(d, e.name));
    }
  };
  walk(dir);
  return files.map((f) => readFileSync(f, 'utf8')).join('\n');
}

function effectiveEnv(objects: K8sObject[], container: any): { env: Record<string, string>; secretKeys: Set<string> } {
  const env: Record<string, string> = {};
  const secretKeys = new Set<string>();
  for (const from of container.envFrom ?? []) {
    if (from.configMapRef) {
      const cm = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === from.configMapRef.name);
      expect(cm, `ConfigMap ${from.configMapRef.name}`).toBeDefined();
      Object.assign(env, cm?.data ?? {});
    }
    if (from.secretRef) {
      const s = objects.find((o) => o.kind === 'Secret' && o.metadata.name === from.secretRef.name);
      for (const k of Object.keys({ ...(s?.stringData ?? {}), ...(s?.data ?? {}) })) secretKeys.add(k);
    }
  }
  for (const e of container.env ?? []) if (e.value !== undefined) env[e.name] = String(e.value);
  return { env, secretKeys };
}

const portOf = (container: any, name: string): number | undefined => container.ports?.find((p: any) => p.name === name)?.containerPort;
const podLabels0 = (dep: any): Record<string, string> => dep?.spec.template.metadata.labels ?? {};

/** Services whose requests wait for a whole generation: generation itself and its gRPC callers that hold a client request. */
const LONG_REQUESTS = SERVICES.filter((s) => s === 'generation' || /createClient\(GenerationServiceService/.test(serviceSource(s)));

/** ServiceName (ctx.resolve) -> Deployment, and the port a caller uses. */
const RESOLVE_TARGET: Record<string, [string, 'grpc' | 'http']> = {
  tenancy: ['tenancy', 'grpc'],
  library: ['library', 'grpc'],
  generation: ['generation', 'grpc'],
  usage: ['usage-metering', 'grpc'],
  webhooks: ['webhook-dispatcher', 'grpc'],
  oauth: ['oauth', 'http'],
  mcp: ['mcp', 'http'],
};

/**
 * Who calls whom: the module graph (services/stack/src/modules.ts), which test/e2e/module-graph.test.ts holds
 * to the calls the code makes (ctx.resolve in services/<svc>/src and in the library functions they import, such
 * as createClients of @imagegen/operations). Callee -> callers, among the deployed services.
 */
function callGraph(services: string[]): Map<string, Set<string>> {
  const callers = new Map<string, Set<string>>();
  for (const [from, tos] of declaredGraph()) {
    if (!services.includes(from)) continue;
    for (const to of tos) {
      if (!callers.has(to)) callers.set(to, new Set());
      callers.get(to)?.add(from);
    }
  }
  return callers;
}

const selects = (sel: any, labels: Record<string, string>) =>
  Object.entries(sel?.matchLabels ?? {}).every(([k, v]) => labels[k] === v) && !sel?.matchExpressions?.length;

/**
 * NetworkPolicies allow exactly the module graph: for each Deployment, the set of (source, port) pairs the
 * policies selecting it admit. A source is "pod:<name>" (same namespace), "ns:<namespace>" or "any".
 */
function admitted(objects: K8sObject[], dep: any): { isolated: boolean; rules: Set<string> } {
  const labels = podLabels0(dep);
  const container = dep.spec.template.spec.containers[0];
  const rules = new Set<string>();
  let isolated = false;
  for (const np of objects.filter((o) => o.kind === 'NetworkPolicy')) {
    if (!selects(np.spec.podSelector, labels)) continue;
    if (!(np.spec.policyTypes ?? ['Ingress']).includes('Ingress')) continue;
    isolated = true;
    for (const rule of np.spec.ingress ?? []) {
      const ports = (rule.ports ?? [{ port: 'any' }]).map((p: any) =>
        typeof p.port === 'number' ? String(p.port) : p.port === 'any' ? 'any' : String(portOf(container, p.port) ?? `unknown:${p.port}`),
      );
      const froms = (rule.from ?? [{}]).map((f: any) => {
        if (f.namespaceSelector) return `ns:${f.namespaceSelector.matchLabels?.['kubernetes.io/metadata.name'] ?? '*'}`;
        if (f.podSelector) {
          const name = f.podSelector.matchLabels?.['app.kubernetes.io/name'];
          return name && Object.keys(f.podSelector.matchLabels).length === 1 ? `pod:${name}` : `pods:${JSON.stringify(f.podSelector)}`;
        }
        return 'any';
      });
      for (const f of froms) for (const p of ports) rules.add(`${f}@${p}`);
    }
  }
  return { isolated, rules };
}

function checkNetworkPolicies(name: string, objects: K8sObject[], services: string[], extraEdges: [string, string, string][] = []) {
  const graph = callGraph(services.filter((s) => !DEV_ONLY.has(s)));
  for (const [from, to] of extraEdges) {
    if (!graph.has(to)) graph.set(to, new Set());
    graph.get(to)?.add(from);
  }
  for (const svc of services) {
    const dep = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === svc);
    const container = dep?.spec.template.spec.containers[0];
    const { isolated, rules } = admitted(objects, dep);
    expect(isolated, `${name}/${svc}: selected by an Ingress NetworkPolicy`).toBe(true);
    const expected = new Set<string>();
    if (svc === 'gateway') {
      expected.add(`ns:ingress-nginx@${portOf(container, 'http')}`);
      expected.add(`ns:monitoring@${portOf(container, 'http')}`);
    } else {
      const portName = extraEdges.find(([, to]) => to === svc)?.[2] ?? Object.values(RESOLVE_TARGET).find(([d]) => d === svc)?.[1];
      for (const caller of graph.get(svc) ?? []) expected.add(`pod:${caller}@${portOf(container, portName as string)}`);
      expected.add(`ns:monitoring@${portOf(container, 'ops')}`);
    }
    expect([...rules].sort(), `${name}/${svc}: ingress allowed`).toEqual([...expected].sort());
  }
}

/** Public paths of the gateway (README "Module graph": REST, admin, files, docs, proxied oauth/mcp). */
const PUBLIC_PATHS = ['/api', '/admin', '/files', '/docs', '/mcp', '/sse', '/messages', '/oauth', '/.well-known', '/'];
const STREAMING_PATHS = ['/mcp', '/sse', '/messages'];

function checkIngress(name: string, objects: K8sObject[]) {
  const ingresses = objects.filter((o) => o.kind === 'Ingress');
  const routes = new Map<string, { ing: K8sObject; backend: any }>();
  const hosts = new Set<string>();
  for (const ing of ingresses) {
    for (const rule of ing.spec.rules) {
      hosts.add(rule.host);
      for (const p of rule.http.paths) {
        expect(p.pathType, `${name}: ${p.path} pathType`).toBe('Prefix');
        expect(routes.has(p.path), `${name}: ${p.path} routed twice`).toBe(false);
        routes.set(p.path, { ing, backend: p.backend.service });
      }
    }
  }
  expect(hosts.size, `${name}: one public host`).toBe(1);
  expect([...routes.keys()].sort()).toEqual([...PUBLIC_PATHS].sort());
  const hashes = new Set<string>();
  for (const [path, { ing, backend }] of routes) {
    expect(backend.name, `${name}: ${path}`).toBe('gateway');
    expect(
      objects.find((o) => o.kind === 'Service' && o.metadata.name === 'gateway')?.spec.ports.some((p: any) => p.name === backend.port.name),
    ).toBe(true);
    const ann = ing.metadata.annotations ?? {};
    expect(ann['nginx.ingress.kubernetes.io/proxy-buffering'], `${name}: ${path} unbuffered (SSE)`).toBe('off');
    // provB calls take up to 240 s; streams stay open much longer.
    const min = STREAMING_PATHS.includes(path) ? 3600 : 300;
    for (const t of ['proxy-read-timeout', 'proxy-send-timeout'])
      expect(Number(ann[`nginx.ingress.kubernetes.io/${t}`]), `${name}: ${path} ${t}`).toBeGreaterThanOrEqual(min);
    if (STREAMING_PATHS.includes(path)) expect(ann['nginx.ingress.kubernetes.io/proxy-request-buffering'], `${name}: ${path}`).toBe('off');
    // /sse and /messages of one client reach one gateway pod (mcp keeps the session; ClientIP affinity per gateway pod).
    hashes.add(ann['nginx.ingress.kubernetes.io/upstream-hash-by']);
  }
  expect([...hashes], `${name}: one client-address hash on every gateway route`).toEqual(['$binary_remote_addr']);
  expect(objects.find((o) => o.kind === 'Service' && o.metadata.name === 'mcp')?.spec.sessionAffinity).toBe('ClientIP');
}

function checkBuild(name: string, objects: K8sObject[], services: string[], opts: { secretGenerated: boolean }) {
  const find = (kind: string, n: string) => objects.find((o) => o.kind === kind && o.metadata.name === n);

  for (const svc of services) {
    const dep = find('Deployment', svc);
    expect(dep, `${name}: Deployment ${svc}`).toBeDefined();
    const pod = dep?.spec.template.spec;
    const container = pod.containers.find((c: any) => c.name === svc) ?? pod.containers[0];
    const { env, secretKeys } = effectiveEnv(objects, container);

    // The image's entrypoint runs services/$TARGET/src/main.ts.
    expect(env.TARGET, `${name}/${svc}: TARGET`).toBe(svc);
    expect(existsSync(join(REPO_ROOT, 'services', env.TARGET, 'src', 'main.ts'))).toBe(true);

    // Every variable is one the code reads (catches typos like GRCP_PORT).
    for (const k of [...Object.keys(env), ...secretKeys]) expect(KNOWN_ENV.has(k), `${name}/${svc}: unknown env ${k}`).toBe(true);

    // Ports the code listens on, from the configuration it reads.
    const src = serviceSource(svc);
    const isGateway = svc === 'gateway';
    const expectedPorts: Record<string, number> = {};
    if (isGateway) expectedPorts.http = Number(env.PORT);
    else if (/\bhttpPort\b/.test(src)) expectedPorts.http = Number(env.HTTP_PORT);
    else if (/config\.port\b/.test(src)) expectedPorts.http = Number(env.PORT);
    if (/startGrpcServer\(/.test(src)) {
      expectedPorts.grpc = Number(env.GRPC_PORT);
      expect(env.GRPC_HOST, `${name}/${svc}: gRPC must listen on the pod IP`).toBe('0.0.0.0');
    }
    if (!isGateway) expectedPorts.ops = Number(env.OPS_PORT);
    if (expectedPorts.http !== undefined) expect(env.HOST ?? '0.0.0.0').toBe('0.0.0.0');
    for (const [portName, port] of Object.entries(expectedPorts)) {
      expect(Number.isInteger(port) && port > 0, `${name}/${svc}: ${portName} port configured`).toBe(true);
      expect(portOf(container, portName), `${name}/${svc}: containerPort ${portName}`).toBe(port);
    }

    // Probes: /livez and /readyz on the port that serves them (gateway: its own port; others: the ops server).
    const probePort = isGateway ? 'http' : 'ops';
    for (const [probe, path] of [
      ['livenessProbe', '/livez'],
      ['readinessProbe', '/readyz'],
      ['startupProbe', '/livez'],
    ] as const) {
      const p = container[probe];
      expect(p?.httpGet, `${name}/${svc}: ${probe}`).toBeDefined();
      expect(p.httpGet.path).toBe(path);
      const port = typeof p.httpGet.port === 'number' ? p.httpGet.port : portOf(container, p.httpGet.port);
      expect(port, `${name}/${svc}: ${probe} port`).toBe(portOf(container, probePort));
    }
    // Scrape annotations point at the port serving /metrics.
    const ann = dep?.spec.template.metadata.annotations ?? {};
    expect(Number(ann['prometheus.io/port'])).toBe(portOf(container, probePort));
    expect(ann['prometheus.io/path']).toBe('/metrics');

    // Non-root, read-only root filesystem, a writable /tmp, resources, grace >= SHUTDOWN_GRACE_MS (+ drain).
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(pod.securityContext.runAsUser).toBeGreaterThan(0);
    expect(container.securityContext.readOnlyRootFilesystem).toBe(true);
    expect(container.securityContext.allowPrivilegeEscalation).toBe(false);
    expect(container.securityContext.capabilities.drop).toContain('ALL');
    const tmp = container.volumeMounts.find((m: any) => m.mountPath === '/tmp');
    expect(pod.volumes.find((v: any) => v.name === tmp?.name)?.emptyDir).toBeDefined();
    expect(container.resources.requests.cpu).toBeTruthy();
    expect(container.resources.requests.memory).toBeTruthy();
    expect(container.resources.limits.memory).toBeTruthy();
    const graceMs = Number(env.SHUTDOWN_GRACE_MS ?? 10_000) + Number(env.SHUTDOWN_DRAIN_MS ?? 0);
    expect(pod.terminationGracePeriodSeconds * 1000, `${name}/${svc}: terminationGracePeriodSeconds`).toBeGreaterThanOrEqual(graceMs);

    // seccomp RuntimeDefault on the pod (or the container).
    expect(container.securityContext.seccompProfile?.type ?? pod.securityContext.seccompProfile?.type).toBe('RuntimeDefault');
    // Services holding requests that wait for a generation (provB up to PROVB_TIMEOUT_MS) drain them.
    if (LONG_REQUESTS.includes(svc)) {
      const provB = Number(env.PROVB_TIMEOUT_MS ?? 240_000);
      expect(Number(env.SHUTDOWN_GRACE_MS ?? 10_000), `${name}/${svc}: SHUTDOWN_GRACE_MS covers a provB call`).toBeGreaterThanOrEqual(
        provB,
      );
    }
    // Replicas spread over nodes and zones.
    for (const key of ['kubernetes.io/hostname', 'topology.kubernetes.io/zone']) {
      const c = (pod.topologySpreadConstraints ?? []).find((t: any) => t.topologyKey === key);
      expect(c, `${name}/${svc}: topology spread over ${key}`).toBeDefined();
      for (const [k, v] of Object.entries(c.labelSelector.matchLabels)) expect(podLabels0(dep)[k]).toBe(v);
    }

    // Env from the shared ConfigMap and Secret.
    const refs = (container.envFrom ?? []).map((f: any) => f.configMapRef?.name ?? f.secretRef?.name);
    expect(refs).toEqual(expect.arrayContaining(['imagegen-config', 'imagegen-secrets']));
    if (opts.secretGenerated) {
      for (const k of ['DATABASE_URL', 'CREDENTIALS_KEY', 'ADMIN_TOKEN']) expect(secretKeys.has(k), `${name}: secret ${k}`).toBe(true);
    }

    // The Service selects the pods and exposes the named container ports.
    const service = find('Service', svc);
    expect(service, `${name}: Service ${svc}`).toBeDefined();
    const podLabels = dep?.spec.template.metadata.labels ?? {};
    for (const [k, v] of Object.entries(service?.spec.selector ?? {})) expect(podLabels[k]).toBe(v);
    for (const sp of service?.spec.ports ?? []) {
      expect(portOf(container, sp.targetPort) ?? sp.targetPort, `${name}/${svc}: Service port ${sp.name}`).toBeDefined();
    }
    const dsel = dep?.spec.selector.matchLabels ?? {};
    for (const [k, v] of Object.entries(dsel)) expect(podLabels[k]).toBe(v);

    // HPA and PDB for stateless services.
    if (STATELESS.includes(svc)) {
      const hpa = find('HorizontalPodAutoscaler', svc);
      expect(hpa, `${name}: HPA ${svc}`).toBeDefined();
      expect(hpa?.spec.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: svc });
      expect(hpa?.spec.minReplicas).toBeGreaterThanOrEqual(1);
      expect(hpa?.spec.maxReplicas).toBeGreaterThanOrEqual(hpa?.spec.minReplicas);
      const pdb = find('PodDisruptionBudget', svc);
      expect(pdb, `${name}: PDB ${svc}`).toBeDefined();
      for (const [k, v] of Object.entries(pdb?.spec.selector.matchLabels ?? {})) expect(podLabels[k]).toBe(v);
    }
  }

  // Addresses in the shared configuration name existing Services and their ports.
  const cm = find('ConfigMap', 'imagegen-config')?.data ?? {};
  const addr: Record<string, [string, string]> = {
    TENANCY_ADDR: ['tenancy', 'grpc'],
    LIBRARY_ADDR: ['library', 'grpc'],
    GENERATION_ADDR: ['generation', 'grpc'],
    USAGE_ADDR: ['usage-metering', 'grpc'],
    WEBHOOKS_ADDR: ['webhook-dispatcher', 'grpc'],
  };
  for (const [k, [svc, portName]] of Object.entries(addr)) {
    const [host, port] = String(cm[k]).split(':');
    expect(host, `${name}: ${k}`).toBe(svc);
    expect(Number(port)).toBe(find('Service', svc)?.spec.ports.find((p: any) => p.name === portName)?.port);
  }
  for (const [k, svc] of [
    ['OAUTH_URL', 'oauth'],
    ['MCP_URL', 'mcp'],
  ] as const) {
    const u = new URL(cm[k]);
    expect(u.hostname).toBe(svc);
    expect(Number(u.port)).toBe(find('Service', svc)?.spec.ports.find((p: any) => p.name === 'http')?.port);
  }

  // The gateway is the only public door: every public path, SSE-friendly.
  checkIngress(name, objects);
  // NetworkPolicies admit exactly the module graph's calls.
  checkNetworkPolicies(name, objects, services, services.includes('sandbox-provider') ? [['generation', 'sandbox-provider', 'http']] : []);
}

describe('k8s manifests', () => {
  it('every YAML file under k8s/ parses and every object has apiVersion, kind and name', () => {
    const files = allManifestFiles(K8S);
    expect(files.length).toBeGreaterThan(5);
    for (const f of files) {
      const docs = parseYamlDocs(f);
      for (const d of docs) {
        if (f.endsWith('kustomization.yaml')) {
          expect(d.kind).toBe('Kustomization');
          continue;
        }
        if (Array.isArray(d)) continue; // a JSON 6902 patch file
        expect(d.apiVersion, f).toBeTruthy();
        expect(d.kind, f).toBeTruthy();
        expect(d.metadata?.name, f).toBeTruthy();
      }
    }
  });

  it('base: a Deployment, Service, HPA and PDB per service, probes on real paths and ports', () => {
    const objects = kustomize(join(K8S, 'base'));
    checkBuild('base', objects, STATELESS, { secretGenerated: false });
    // No dev-only upstream in the base.
    expect(objects.some((o) => o.metadata.name === 'sandbox-provider')).toBe(false);
  });

  it('dev overlay: one replica, the sandbox provider as upstream, generated dev secret', () => {
    const objects = kustomize(join(K8S, 'overlays', 'dev'));
    checkBuild('dev', objects, SERVICES, { secretGenerated: true });
    for (const o of objects) expect(o.metadata.namespace).toBe('imagegen-dev');
    for (const d of objects.filter((o) => o.kind === 'Deployment')) expect(d.spec.replicas).toBe(1);
    const cm = objects.find((o) => o.kind === 'ConfigMap')?.data;
    const sandbox = objects.find((o) => o.kind === 'Service' && o.metadata.name === 'sandbox-provider');
    const sandboxPort = sandbox?.spec.ports.find((p: any) => p.name === 'http').port;
    expect(cm.PROVA_BASE_URL).toBe(`http://sandbox-provider:${sandboxPort}/provA`);
    expect(cm.PROVB_BASE_URL).toBe(`http://sandbox-provider:${sandboxPort}/provB`);
    expect(Buffer.from(objects.find((o) => o.kind === 'Secret')?.stringData.CREDENTIALS_KEY, 'base64').length).toBe(32);
    for (const d of objects.filter((o) => o.kind === 'Deployment')) {
      expect(d.spec.template.spec.containers[0].image).toBe('imagegen:local');
      expect(d.spec.template.metadata.labels['app.kubernetes.io/part-of']).toBe('imagegen');
    }
  });

  it('prod overlay: pinned image, TLS, wider autoscaling, external secret documented', () => {
    const objects = kustomize(join(K8S, 'overlays', 'prod'));
    checkBuild('prod', objects, STATELESS, { secretGenerated: false });
    for (const o of objects) expect(o.metadata.namespace).toBe('imagegen');
    for (const d of objects.filter((o) => o.kind === 'Deployment'))
      expect(d.spec.template.spec.containers[0].image).toMatch(/:\d+\.\d+\.\d+$/);
    const ingresses = objects.filter((o) => o.kind === 'Ingress');
    for (const ing of ingresses) expect(ing.spec.tls?.[0]?.hosts, ing.metadata.name).toContain(ing.spec.rules[0].host);
    // One Certificate for the shared TLS secret (two issuer annotations would make two Certificates fight over it).
    expect(ingresses.filter((i) => i.metadata.annotations?.['cert-manager.io/cluster-issuer']).length).toBe(1);
    const gwHpa = objects.find((o) => o.kind === 'HorizontalPodAutoscaler' && o.metadata.name === 'gateway');
    expect(gwHpa?.spec.minReplicas).toBe(3);
    const gen = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'generation');
    expect(gen?.spec.template.spec.containers[0].resources.limits.memory).toBe('2Gi');
    // The Secret is not in the build; the README lists the keys to create.
    expect(objects.some((o) => o.kind === 'Secret')).toBe(false);
    const readme = readFileSync(join(K8S, 'README.md'), 'utf8');
    for (const k of ['imagegen-secrets', 'DATABASE_URL', 'REDIS_URL', 'S3_ACCESS_KEY', 'S3_SECRET_KEY', 'ADMIN_TOKEN', 'CREDENTIALS_KEY']) {
      expect(readme).toContain(k);
    }
  });

  it('the probed paths are the ones the code serves', () => {
    const standalone = read('libs/platform/src/standalone.ts');
    for (const p of ['/livez', '/readyz', '/metrics']) expect(standalone).toContain(`'${p}'`);
    expect(standalone).toContain('OPS_PORT');
    const gatewayOps = read('services/gateway/src/routes/ops.ts');
    for (const p of ['/livez', '/readyz', '/metrics']) expect(gatewayOps).toContain(`app.get('${p}'`);
    expect(read('services/gateway/src/routes/index.ts')).toMatch(/import opsRoutes from '\.\/ops\.js'/);
    for (const svc of SERVICES) {
      const main = read(`services/${svc}/src/main.ts`);
      expect(main, svc).toContain(`runStandalone('${svc}'`);
      // Only the gateway serves its ops endpoints itself.
      expect(main.includes('opsServer: false'), svc).toBe(svc === 'gateway');
    }
  });

  it('external data services are documented with their Helm charts', () => {
    const readme = readFileSync(join(K8S, 'README.md'), 'utf8');
    for (const chart of ['nats/nats', 'postgresql', 'minio', 'redis']) expect(readme).toContain(chart);
    expect(readme).toMatch(/jetstream/i);
  });
});
