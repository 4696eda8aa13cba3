import { existsSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { REPO_ROOT } from '../distributed/harness.js';
import type { K8sObject } from '../distributed/kustomize.js';

/**
 * Offline validation of Kubernetes objects against the Kubernetes API schemas, as the API server
 * would do on `kubectl apply` (field validation Strict, kubectl's default since 1.27):
 *
 * - types, formats, enums and required fields: the OpenAPI schema of each kind, precompiled by the
 *   npm package `kubernetes-models` (5.x: Kubernetes v1.36, generated from the API server's OpenAPI
 *   spec) and run through its `validate()`;
 * - unknown fields (a typo such as `imagePullPolcy`, a field in the wrong place): that package's
 *   generated schemas leave `additionalProperties` open, so every key of the object is also looked up in
 *   the package's type declarations, generated from the same OpenAPI definitions, through the TypeScript
 *   compiler: a key that is no property of its definition (and no entry of a map) is an error.
 */

export const KUBERNETES_VERSION = 'v1.36';
/** kubernetes-models 5.x carries the v1.36 schemas (its changelog: "Update to Kubernetes v1.36.0"). */
export const MODELS_MAJOR = '5.';

export const MODELS_DIR = realpathSync(join(REPO_ROOT, 'node_modules', 'kubernetes-models'));

/** kubernetes-models module of a kind: `apps/v1` + `Deployment` -> apps/v1/Deployment (core `v1` -> v1/Service). */
function modulePath(apiVersion: string, kind: string): string {
  return `${apiVersion}/${kind}`;
}

let program: { checker: ts.TypeChecker; files: Map<string, ts.SourceFile> } | undefined;

function typeChecker(kinds: string[]): { checker: ts.TypeChecker; files: Map<string, ts.SourceFile> } {
  const roots = kinds.map((k) => join(MODELS_DIR, `${k}.d.ts`));
  if (program && roots.every((r) => program?.files.has(r))) return program;
  const p = ts.createProgram({
    rootNames: roots,
    options: {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      noEmit: true,
      skipLibCheck: true,
      types: [],
    },
  });
  const files = new Map<string, ts.SourceFile>();
  for (const r of roots) {
    const sf = p.getSourceFile(r);
    if (!sf) throw new Error(`kubernetes-models has no declaration ${r}`);
    files.set(r, sf);
  }
  program = { checker: p.getTypeChecker(), files };
  return program;
}

function interfaceType(kindPath: string, kind: string): ts.Type {
  const { checker, files } = typeChecker([kindPath]);
  const sf = files.get(join(MODELS_DIR, `${kindPath}.d.ts`)) as ts.SourceFile;
  const decl = sf.statements.find((s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === `I${kind}`);
  if (!decl) throw new Error(`${kindPath}.d.ts declares no I${kind}`);
  return checker.getTypeAtLocation(decl.name);
}

const isObjectValue = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Keys of `value` that its definition `type` does not have, as JSON pointers. */
function unknownFields(checker: ts.TypeChecker, value: unknown, type: ts.Type, path: string, out: string[]): void {
  if (value === null || value === undefined) return;
  let t = checker.getNonNullableType(type);
  if (t.flags & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) return;
  if (t.isUnion()) {
    // IntOrString, Quantity (number | string): scalars; object members are followed when the value is one.
    const members = t.types.filter((m) =>
      Array.isArray(value)
        ? checker.isArrayType(m)
        : isObjectValue(value)
          ? m.flags & ts.TypeFlags.Object && !checker.isArrayType(m)
          : false,
    );
    if (members.length !== 1) return;
    t = members[0];
  }
  if (Array.isArray(value)) {
    if (!checker.isArrayType(t)) return; // a type error: validate() reports it
    const element = checker.getTypeArguments(t as ts.TypeReference)[0];
    for (const [i, v] of value.entries()) unknownFields(checker, v, element, `${path}/${i}`, out);
    return;
  }
  if (!isObjectValue(value) || !(t.flags & ts.TypeFlags.Object)) return;
  const mapValue = t.getStringIndexType();
  for (const [key, v] of Object.entries(value)) {
    const prop = t.getProperty(key);
    const pointer = `${path}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`;
    if (prop) unknownFields(checker, v, checker.getTypeOfSymbol(prop), pointer, out);
    else if (mapValue) unknownFields(checker, v, mapValue, pointer, out);
    else out.push(`${pointer}: unknown field "${key}"`);
  }
}

export interface SchemaProblem {
  object: string;
  problems: string[];
}

/** Every problem of `obj` against the Kubernetes API schema of its apiVersion and kind (empty: valid). */
export async function validateObject(obj: K8sObject): Promise<string[]> {
  const kindPath = modulePath(obj.apiVersion, obj.kind);
  if (!existsSync(join(MODELS_DIR, `${kindPath}.js`)))
    return [`no schema for ${obj.apiVersion} ${obj.kind} in Kubernetes ${KUBERNETES_VERSION}`];
  const mod = await import(join(MODELS_DIR, `${kindPath}.js`));
  const Model = mod[obj.kind];
  const problems: string[] = [];
  try {
    new Model(structuredClone(obj)).validate();
  } catch (err) {
    const errors = (err as { errors?: { instancePath: string; message?: string; params?: unknown }[] }).errors;
    if (errors?.length) {
      for (const e of errors)
        problems.push(`${e.instancePath.replace(/^\/?data/, '') || '/'}: ${e.message} ${JSON.stringify(e.params ?? {})}`);
    } else problems.push(String((err as Error).message));
  }
  const { checker } = typeChecker([kindPath]);
  unknownFields(checker, obj, interfaceType(kindPath, obj.kind), '', problems);
  return problems;
}

/** Validates every object; returns the invalid ones with their problems. */
export async function validateAll(objects: K8sObject[]): Promise<SchemaProblem[]> {
  // One TypeScript program for every kind present.
  typeChecker([...new Set(objects.map((o) => modulePath(o.apiVersion, o.kind)))].filter((p) => existsSync(join(MODELS_DIR, `${p}.d.ts`))));
  const out: SchemaProblem[] = [];
  for (const o of objects) {
    const problems = await validateObject(o);
    if (problems.length) out.push({ object: `${o.kind}/${o.metadata?.name}`, problems });
  }
  return out;
}
