import { appendFileSync } from 'node:fs';
import Ajv, { type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';

/**
 * Holds the OpenAPI document to the truth (issue 14): every answer an end-to-end test receives through
 * createApi is checked against the gateway's own /docs/json. An undeclared status, a body that does not match
 * the declared schema (every object closed: an undeclared field is a mismatch) or a missing declared header
 * throws, failing the test that made the call.
 *
 * CONTRACT_SAMPLES=<file> appends every answer (method, path, status, body) to that file as JSON lines as well.
 */

interface Operation {
  method: string;
  template: string;
  match: RegExp;
  responses: Record<string, { content?: Record<string, { schema?: object }>; headers?: Record<string, { required?: boolean }> }>;
}

interface Contract {
  ops: Operation[];
  validators: Map<string, ValidateFunction>;
  ajv: Ajv;
}

const contracts = new Map<string, Promise<Contract>>();
let checked = 0;
// CONTRACT_REPORT=<file>: each test process appends how many answers it checked (the suite's figure is the sum).
if (process.env.CONTRACT_REPORT) {
  const file = process.env.CONTRACT_REPORT;
  process.once('exit', () => appendFileSync(file, `${checked}\n`));
}
/** How many answers have been checked in this process (the suite's count is the sum over its files). */
export const checkedResponses = () => checked;

/** Closes every object schema that does not say otherwise, so an undeclared response field is a mismatch. */
export function closeObjects(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closeObjects);
  if (!schema || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) {
    out[k] = k === 'properties' || k === 'patternProperties' ? mapValues(v as object, closeObjects) : closeObjects(v);
  }
  if ((out.type === 'object' || out.properties) && out.additionalProperties === undefined && !out.patternProperties) {
    out.additionalProperties = false;
  }
  return out;
}

const mapValues = (o: object, f: (v: unknown) => unknown) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, f(v)]));

async function load(baseUrl: string): Promise<Contract> {
  const res = await fetch(`${baseUrl}/docs/json`);
  if (res.status !== 200) throw new Error(`contract: GET /docs/json answered ${res.status}`);
  const doc = (await res.json()) as {
    paths: Record<string, Record<string, Operation['responses'] extends infer R ? { responses: R } : never>>;
  };
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats(ajv);
  // Responses shared through components.responses ($ref) are read in place.
  const shared = ((doc as { components?: { responses?: Record<string, unknown> } }).components?.responses ?? {}) as Record<
    string,
    Operation['responses'][string]
  >;
  const deref = (r: Operation['responses'][string] & { $ref?: string }) => (r.$ref ? (shared[r.$ref.split('/').pop() as string] ?? r) : r);
  const ops: Operation[] = [];
  for (const [template, item] of Object.entries(doc.paths)) {
    const re = template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+');
    for (const [method, op] of Object.entries(item)) {
      if (!op || typeof op !== 'object' || !('responses' in op)) continue;
      const responses = Object.fromEntries(Object.entries(op.responses).map(([status, r]) => [status, deref(r)]));
      ops.push({ method: method.toUpperCase(), template, match: new RegExp(`^${re}$`), responses });
    }
  }
  // Literal segments win over parameters (/api/executions/active before /api/executions/{executionId}).
  const params = (t: string) => t.split('{').length;
  ops.sort((a, b) => params(a.template) - params(b.template));
  return { ops, validators: new Map(), ajv };
}

export interface Answer {
  method: string;
  path: string;
  status: number;
  headers: Headers;
  body: unknown;
}

/** Throws when the answer is not one the document declares. */
export async function checkAnswer(baseUrl: string, a: Answer): Promise<void> {
  const pathOnly = a.path.split('?')[0] as string;
  if (process.env.CONTRACT_SAMPLES) {
    appendFileSync(
      process.env.CONTRACT_SAMPLES,
      `${JSON.stringify({ method: a.method, path: pathOnly, status: a.status, body: a.body })}\n`,
    );
    if (process.env.CONTRACT_RECORD_ONLY === '1') return;
  }
  let c = contracts.get(baseUrl);
  if (!c) {
    c = load(baseUrl);
    contracts.set(baseUrl, c);
    c.catch(() => contracts.delete(baseUrl));
  }
  const contract = await c;
  const where = `${a.method} ${pathOnly} -> ${a.status}`;
  const op = contract.ops.find((o) => o.method === a.method && o.match.test(pathOnly));
  // Paths outside the document (the SPA, /files/*, /docs itself) are not operations of the API.
  if (!op) {
    if (/^\/(api|admin)\//.test(pathOnly)) {
      if (a.status === 404 || a.status === 405) return;
      throw new Error(`contract: ${where}: no operation in /docs/json`);
    }
    return;
  }
  checked++;
  const declared = op.responses[String(a.status)] ?? op.responses[`${String(a.status)[0]}XX`] ?? op.responses.default;
  if (!declared) throw new Error(`contract: ${where}: status not declared for ${a.method} ${op.template}`);
  for (const [name, h] of Object.entries(declared.headers ?? {})) {
    if (h.required && !a.headers.has(name)) throw new Error(`contract: ${where}: header ${name} missing`);
  }
  const type = (a.headers.get('content-type') ?? '').split(';')[0]?.trim() ?? '';
  const content = declared.content;
  if (!content) {
    if (a.body !== undefined && a.body !== '') throw new Error(`contract: ${where}: a body where none is declared`);
    return;
  }
  const media = content[type] ?? content['*/*'];
  if (!media) throw new Error(`contract: ${where}: content type ${type || '(none)'} not declared (${Object.keys(content).join(', ')})`);
  if (!media.schema || type !== 'application/json') return;
  const key = `${a.method} ${op.template} ${a.status}`;
  let validate = contract.validators.get(key);
  if (!validate) {
    validate = contract.ajv.compile(closeObjects(media.schema) as object);
    contract.validators.set(key, validate);
  }
  if (!validate(a.body)) {
    const errs = (validate.errors ?? [])
      .slice(0, 5)
      .map((e) => `${e.instancePath || '/'} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`);
    throw new Error(`contract: ${where}: body does not match the document: ${errs.join('; ')}\n${JSON.stringify(a.body).slice(0, 500)}`);
  }
}
