import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import YAML from 'yaml';

/**
 * A small kustomize, enough for k8s/ (no kubectl or kustomize binary on CI machines): resources
 * (files and directories), configMapGenerator/secretGenerator (literals, envs, files; behavior
 * create/merge/replace), labels (includeTemplates), namespace, images, and patches (strategic merge
 * by kind+name with lists merged by `name`, or JSON 6902 ops with a kind/name target). Generated names
 * keep their base name (no hash suffix): references resolve by that name.
 */

export type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [k: string]: any;
};

const CLUSTER_SCOPED = new Set([
  'Namespace',
  'ClusterRole',
  'ClusterRoleBinding',
  'CustomResourceDefinition',
  'StorageClass',
  'IngressClass',
  'PriorityClass',
]);

export function parseYamlDocs(file: string): any[] {
  return YAML.parseAllDocuments(readFileSync(file, 'utf8'))
    .map((d) => {
      if (d.errors.length) throw new Error(`${file}: ${d.errors[0].message}`);
      return d.toJS();
    })
    .filter((d) => d !== null && d !== undefined);
}

export function kustomize(dir: string): K8sObject[] {
  const kfile = ['kustomization.yaml', 'kustomization.yml', 'Kustomization'].map((f) => join(dir, f)).find(existsSync);
  if (!kfile) throw new Error(`no kustomization in ${dir}`);
  const k = YAML.parse(readFileSync(kfile, 'utf8')) ?? {};
  let objects: K8sObject[] = [];

  for (const r of k.resources ?? []) {
    const p = resolve(dir, r);
    if (!existsSync(p)) throw new Error(`${kfile}: resource ${r} does not exist`);
    if (statSync(p).isDirectory()) objects.push(...kustomize(p));
    else objects.push(...(parseYamlDocs(p) as K8sObject[]));
  }

  const generate = (kind: 'ConfigMap' | 'Secret', gens: any[] = []) => {
    for (const g of gens) {
      const data: Record<string, string> = {};
      for (const lit of g.literals ?? []) {
        const i = String(lit).indexOf('=');
        data[String(lit).slice(0, i)] = String(lit).slice(i + 1);
      }
      for (const envFile of g.envs ?? []) Object.assign(data, parseEnvFile(resolve(dir, envFile)));
      for (const f of g.files ?? []) {
        const [key, path] = String(f).includes('=') ? String(f).split('=') : [String(f).split('/').pop() as string, String(f)];
        data[key] = readFileSync(resolve(dir, path), 'utf8');
      }
      const behavior = g.behavior ?? 'create';
      const existing = objects.find((o) => o.kind === kind && o.metadata.name === g.name);
      const field = kind === 'Secret' ? 'stringData' : 'data';
      if (behavior === 'create') {
        if (existing) throw new Error(`${kfile}: ${kind} ${g.name} generated twice`);
        objects.push({
          apiVersion: 'v1',
          kind,
          metadata: { name: g.name },
          [field]: data,
          ...(kind === 'Secret' ? { type: g.type ?? 'Opaque' } : {}),
        });
      } else {
        if (!existing) throw new Error(`${kfile}: ${kind} ${g.name} to ${behavior} does not exist`);
        existing[field] = behavior === 'merge' ? { ...(existing[field] ?? {}), ...data } : data;
      }
    }
  };
  generate('ConfigMap', k.configMapGenerator);
  generate('Secret', k.secretGenerator);

  for (const p of k.patches ?? k.patchesStrategicMerge?.map((path: string) => ({ path })) ?? []) {
    const text = p.path ? readFileSync(resolve(dir, p.path), 'utf8') : String(p.patch);
    const docs = YAML.parseAllDocuments(text)
      .map((d) => d.toJS())
      .filter(Boolean);
    for (const doc of docs) {
      if (Array.isArray(doc)) {
        const targets = objects.filter((o) => matchesTarget(o, p.target));
        if (targets.length === 0) throw new Error(`${kfile}: patch target ${JSON.stringify(p.target)} matches nothing`);
        for (const t of targets) applyJson6902(t, doc);
      } else {
        const sel = p.target ?? { kind: doc.kind, name: doc.metadata?.name };
        const targets = objects.filter((o) => matchesTarget(o, sel));
        if (targets.length === 0) throw new Error(`${kfile}: strategic patch for ${sel.kind}/${sel.name} matches nothing`);
        for (const t of targets) strategicMerge(t, doc);
      }
    }
  }

  for (const l of k.labels ?? []) {
    for (const o of objects) {
      o.metadata.labels = { ...(o.metadata.labels ?? {}), ...l.pairs };
      if (l.includeTemplates && o.spec?.template?.metadata) {
        o.spec.template.metadata.labels = { ...(o.spec.template.metadata.labels ?? {}), ...l.pairs };
      }
    }
  }
  if (k.commonLabels) {
    for (const o of objects) o.metadata.labels = { ...(o.metadata.labels ?? {}), ...k.commonLabels };
  }

  for (const img of k.images ?? []) {
    for (const o of objects) {
      for (const c of [...(o.spec?.template?.spec?.containers ?? []), ...(o.spec?.template?.spec?.initContainers ?? [])]) {
        const [name, tag] = splitImage(c.image);
        if (name !== img.name) continue;
        c.image = `${img.newName ?? name}${img.digest ? `@${img.digest}` : `:${img.newTag ?? tag ?? 'latest'}`}`;
      }
    }
  }

  if (k.namespace) {
    objects = objects.map((o) => (CLUSTER_SCOPED.has(o.kind) ? o : { ...o, metadata: { ...o.metadata, namespace: k.namespace } }));
  }
  return objects;
}

function splitImage(image: string): [string, string | undefined] {
  const at = image.indexOf('@');
  if (at >= 0) return [image.slice(0, at), undefined];
  const slash = image.lastIndexOf('/');
  const colon = image.lastIndexOf(':');
  return colon > slash ? [image.slice(0, colon), image.slice(colon + 1)] : [image, undefined];
}

function matchesTarget(o: K8sObject, t?: { kind?: string; name?: string; group?: string; version?: string }): boolean {
  if (!t) return false;
  if (t.kind && o.kind !== t.kind) return false;
  if (t.name && !new RegExp(`^(?:${t.name})$`).test(o.metadata.name)) return false;
  return true;
}

export function parseEnvFile(file: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of readFileSync(file, 'utf8').split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const i = line.indexOf('=');
    if (i < 0) throw new Error(`${file}: bad line ${line}`);
    out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

function pointer(path: string): string[] {
  return path
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function applyJson6902(target: any, ops: { op: string; path: string; value?: unknown; from?: string }[]) {
  for (const op of ops) {
    const parts = pointer(op.path);
    const last = parts.pop() as string;
    let parent = target;
    for (const p of parts) {
      if (parent[p] === undefined) {
        if (op.op === 'add') parent[p] = {};
        else throw new Error(`json patch: ${op.path} does not exist`);
      }
      parent = parent[p];
    }
    const value = structuredClone(op.value);
    if (op.op === 'add') {
      if (Array.isArray(parent)) parent.splice(last === '-' ? parent.length : Number(last), 0, value);
      else parent[last] = value;
    } else if (op.op === 'replace') {
      if (!(last in parent)) throw new Error(`json patch replace: ${op.path} does not exist`);
      parent[last] = value;
    } else if (op.op === 'remove') {
      if (Array.isArray(parent)) parent.splice(Number(last), 1);
      else delete parent[last];
    } else {
      throw new Error(`json patch op ${op.op} not supported here`);
    }
  }
}

function strategicMerge(target: any, patch: any) {
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) {
      delete target[key];
    } else if (Array.isArray(value)) {
      const cur = target[key];
      if (Array.isArray(cur) && value.every((v) => v && typeof v === 'object' && 'name' in v)) {
        for (const item of value) {
          const existing = cur.find((c: any) => c?.name === (item as any).name);
          if (existing) strategicMerge(existing, item);
          else cur.push(structuredClone(item));
        }
      } else {
        target[key] = structuredClone(value);
      }
    } else if (typeof value === 'object') {
      if (typeof target[key] !== 'object' || target[key] === null) target[key] = {};
      strategicMerge(target[key], value);
    } else {
      target[key] = value;
    }
  }
}
