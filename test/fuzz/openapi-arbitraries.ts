import fc from 'fast-check';

/**
 * Requests built from the OpenAPI document the gateway serves at /docs/json: for every operation, path and
 * query values, headers and JSON bodies, either valid-ish (shaped by the operation's schemas, with odd but
 * legal content) or hostile (at least one element the gateway must refuse with a 4xx).
 */

export type Schema = {
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  format?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  pattern?: string;
  items?: Schema;
  properties?: Record<string, Schema>;
  required?: string[];
  oneOf?: Schema[];
  anyOf?: Schema[];
  allOf?: Schema[];
};

export interface Param {
  name: string;
  in: 'path' | 'query';
  required: boolean;
  schema: Schema;
}

export type Auth = 'tenant' | 'admin' | 'none';

export interface Operation {
  method: string;
  template: string;
  params: Param[];
  body?: Schema;
  auth: Auth;
  /** Proxied or framework surfaces that are not in the document (only their query is fuzzed). */
  extra?: boolean;
}

/** Routes that legitimately do expensive work (generation, URL fetches, uploads): capped in the valid-ish phase. */
export const isExpensive = (op: Operation): boolean =>
  /\/generate|generate-multi|edit-image|upload-for-editing|\/test$/.test(op.template) ||
  (op.method === 'POST' && /^\/api\/(images|products|scenes)$/.test(op.template)) ||
  (op.method === 'PATCH' && /^\/api\/(products|scenes)\//.test(op.template));

const AUTH_NONE = [
  /^POST \/admin\/auth\/login$/,
  /^GET \/admin\/invitations\/\{token\}$/,
  /^POST \/admin\/invitations\/\{token\}\/accept$/,
];

export function operationsOf(doc: { paths: Record<string, Record<string, any>> }): Operation[] {
  const ops: Operation[] = [];
  for (const [template, methods] of Object.entries(doc.paths)) {
    for (const [m, op] of Object.entries(methods)) {
      const method = m.toUpperCase();
      if (!['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].includes(method)) continue;
      // Outlined in the document but served by the oauth and mcp services: fuzzed as EXTRA_OPERATIONS below.
      if (op['x-proxied']) continue;
      const key = `${method} ${template}`;
      // `security: []` in the document: no credential (GET /health, sign-in, invitations).
      const open = Array.isArray(op.security) && op.security.length === 0;
      const auth: Auth = open || AUTH_NONE.some((r) => r.test(key)) ? 'none' : template.startsWith('/admin') ? 'admin' : 'tenant';
      const params = ((op.parameters ?? []) as any[])
        .filter((p) => p.in === 'path' || p.in === 'query')
        .map((p) => ({ name: p.name, in: p.in, required: !!p.required || p.in === 'path', schema: (p.schema ?? {}) as Schema }));
      const body = op.requestBody?.content?.['application/json']?.schema as Schema | undefined;
      // A body-taking route without a documented schema (checked by hand) still gets object bodies.
      ops.push({ method, template, params, body: body ?? (['POST', 'PATCH', 'PUT'].includes(method) ? {} : undefined), auth });
    }
  }
  return ops;
}

/** Surfaces outside the document: the proxied OAuth/MCP paths (their query; two of them their JSON bodies) and an unknown route. */
export const EXTRA_OPERATIONS: Operation[] = [
  ['GET', '/'],
  ['GET', '/.well-known/oauth-authorization-server'],
  ['GET', '/.well-known/oauth-protected-resource'],
  ['GET', '/oauth/.well-known/openid-configuration'],
  ['GET', '/oauth/authorize'],
  ['POST', '/oauth/token'],
  ['POST', '/mcp'],
  ['GET', '/no/such/route'],
  ['GET', '/health'],
]
  .map(([method, template]) => ({ method, template, params: [], auth: 'none' as const, extra: true }) as Operation)
  .concat([
    {
      method: 'POST',
      template: '/oauth/register',
      params: [],
      auth: 'none',
      extra: true,
      body: {
        type: 'object',
        required: ['redirect_uris'],
        properties: {
          client_name: { type: 'string', maxLength: 100 },
          redirect_uris: {
            type: 'array',
            minItems: 1,
            maxItems: 2,
            items: { type: 'string', enum: ['http://127.0.0.1/cb', 'https://app.example/cb'] },
          },
          token_endpoint_auth_method: { type: 'string', enum: ['none'] },
        },
      },
    },
    {
      method: 'POST',
      template: '/mcp',
      params: [],
      auth: 'none',
      extra: true,
      body: {
        type: 'object',
        required: ['jsonrpc', 'method'],
        properties: {
          jsonrpc: { const: '2.0' },
          id: { type: 'integer', minimum: 1, maximum: 1000 },
          method: { type: 'string', enum: ['tools/list', 'tools/call', 'initialize', 'ping'] },
          params: {
            type: 'object',
            properties: {
              name: { type: 'string', enum: ['list_images', 'get_character'] },
              arguments: { type: 'object', properties: { search: { type: 'string' } } },
            },
          },
        },
      },
    },
  ]);

// ---------------------------------------------------------------- strings

const ODD_STRINGS = [
  'Ünïcödé',
  '🦊 fox',
  'שלום',
  "' OR '1'='1",
  '<script>alert(1)</script>',
  '../../etc/passwd',
  '%00',
  '%zz',
  '$' + '{7*7}',
  '{{7*7}}',
  ' ',
  '\t\n',
  'null',
  'undefined',
  '__proto__',
  'constructor',
  '0',
  '-1',
  '1e308',
  '\u200b',
  '\ufeff',
  '𝔘𝔫𝔦',
];

function legalString(s: Schema): fc.Arbitrary<string> {
  const min = s.minLength ?? 0;
  const max = Math.min(s.maxLength ?? 300, 5000);
  if (s.format === 'date-time' || s.format === 'date')
    return fc.date({ noInvalidDate: true, min: new Date(0), max: new Date(4e12) }).map((d) => d.toISOString());
  if (s.format === 'email') return fc.constantFrom('a@example.com', 'user+tag@example.org', 'x@localhost');
  const base = fc.oneof(
    { weight: 3, arbitrary: fc.string({ maxLength: Math.min(max, 40) }) },
    { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: Math.min(max, 20) }) },
    { weight: 2, arbitrary: fc.constantFrom(...ODD_STRINGS) },
    { weight: 1, arbitrary: fc.constant('x'.repeat(Math.max(min, max))) },
  );
  return base.map((v) => {
    let out = v;
    if (out.length < min) out = out.padEnd(min, 'a');
    // Cut by code points (never half a surrogate pair: a lone surrogate is hostile, not odd).
    if (out.length > max)
      out = Array.from(out)
        .slice(0, max)
        .join('')
        .slice(0, max)
        .replace(/[\ud800-\udbff]$/, '');
    return out;
  });
}

/** Values a server-side fetch would reach quickly: loopback (a closed port, a non-image) or nonsense. */
export const urlValues = (baseUrl: string) =>
  fc.constantFrom(
    'http://127.0.0.1:9/a.png',
    `${baseUrl}/health`,
    `${baseUrl}/favicon.ico`,
    'ftp://example.com/a.png',
    'not a url',
    'javascript:alert(1)',
    '',
  );

// ---------------------------------------------------------------- schema-driven values

export interface GenOpts {
  baseUrl: string;
  /** Ids and names of things that exist (seeded), used for identifiers. */
  pool: string[];
}

function typesOf(s: Schema): string[] {
  if (Array.isArray(s.type)) return s.type;
  if (s.type) return [s.type];
  if (s.properties) return ['object'];
  if (s.items) return ['array'];
  return ['string', 'integer', 'boolean', 'object'];
}

/** A value shaped by the schema (legal most of the time: bounds respected, required keys present). */
export function validish(s: Schema, o: GenOpts, depth = 0, name = ''): fc.Arbitrary<unknown> {
  if (s.const !== undefined) return fc.constant(s.const);
  if (s.enum?.length) return fc.constantFrom(...s.enum);
  const alts = s.oneOf ?? s.anyOf;
  if (alts?.length) return fc.oneof(...alts.map((a) => validish(a, o, depth, name)));
  if (s.allOf?.length) return validish(Object.assign({}, ...s.allOf), o, depth, name);
  const arbs = typesOf(s).map((t): fc.Arbitrary<unknown> => {
    switch (t) {
      case 'string':
        if (/url|uri/i.test(name) || s.format === 'uri') return urlValues(o.baseUrl);
        if (/(^|_)id$|identifier|Id$/.test(name) && o.pool.length) return fc.oneof(fc.constantFrom(...o.pool), legalString(s));
        return legalString(s);
      case 'integer': {
        const min = Math.max(s.minimum ?? -1000, Number.MIN_SAFE_INTEGER);
        const max = Math.min(s.maximum ?? 1_000_000, Number.MAX_SAFE_INTEGER);
        if (/^(n|number_of_images)$/.test(name)) return fc.constant(1);
        const ids = o.pool.filter((p) => /^\d+$/.test(p)).map(Number);
        return fc.oneof(
          fc.integer({ min: Math.max(min, -1e9), max: Math.min(max, 1e9) }),
          fc.constantFrom(min, max),
          ...(ids.length && /id/i.test(name) ? [fc.constantFrom(...ids)] : []),
        );
      }
      case 'number':
        return fc.double({ min: s.minimum ?? -1e6, max: s.maximum ?? 1e6, noNaN: true, noDefaultInfinity: true });
      case 'boolean':
        return fc.boolean();
      case 'null':
        return fc.constant(null);
      case 'array': {
        const maxItems = Math.min(s.maxItems ?? 4, 4);
        const minItems = Math.min(s.minItems ?? 0, maxItems);
        return fc.array(validish(s.items ?? { type: 'string' }, o, depth + 1, name), { minLength: minItems, maxLength: maxItems });
      }
      default: {
        if (depth > 4) return fc.constant({});
        const props = s.properties ?? {};
        const keys = Object.keys(props);
        if (keys.length === 0)
          return fc.dictionary(fc.string({ maxLength: 10 }), fc.oneof(fc.string({ maxLength: 10 }), fc.integer(), fc.boolean()), {
            maxKeys: 3,
          });
        const rec: Record<string, fc.Arbitrary<unknown>> = {};
        for (const k of keys) rec[k] = validish(props[k] as Schema, o, depth + 1, k);
        return fc.record(rec, { requiredKeys: (s.required ?? []).filter((k) => k in rec) });
      }
    }
  });
  return arbs.length === 1 ? (arbs[0] as fc.Arbitrary<unknown>) : fc.oneof(...arbs);
}

// ---------------------------------------------------------------- hostile elements

export const hostileText = fc.oneof(
  fc.tuple(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 })).map(([a, b]) => `${a}\u0000${b}`),
  fc.tuple(fc.string({ maxLength: 8 }), fc.constantFrom('\ud800', '\udbff', '\udc00', '\udfff')).map(([a, b]) => `${a}${b}`),
  fc.constantFrom('\u0000', '\ud800x', 'x\udc00'),
);

/** Raw (not re-encoded) path segments the router or the edge must refuse. */
export const hostilePathSegment = fc.oneof(
  fc.constantFrom('%00', 'a%00', '%00a', '%zz', 'a%z', '%', '%ff', '%C0%80', '%ED%A0%80', '%E0%A4%A', '%%'),
  fc.integer({ min: 2049, max: 2400 }).map((n) => 'p'.repeat(n)),
);

/** Raw query values the edge must refuse: malformed escapes, escapes that are not UTF-8, NUL. */
export const hostileQueryValue = fc.constantFrom('%', '%z', '%zz', '%G1', '%ff', '%C0%80', '%ED%A0%80', '%E0%A4%A', 'a%00b', '%00', 'x%');

/** A query value that a typed parameter must refuse (or undefined when the parameter accepts any text). */
export function wrongTypeValue(s: Schema): fc.Arbitrary<string> | undefined {
  const t = typesOf(s);
  if (s.enum?.length) return fc.constantFrom('not-a-member', 'ZZZ', '1.5');
  if (t.includes('integer')) {
    const vals = ['abc', '0.5', '1.25', '1e400', 'NaN', 'Infinity', '9007199254740993', '99999999999999999999', '--1', '-0x1'];
    if (s.minimum !== undefined) vals.push(String(s.minimum - 1));
    if (s.maximum !== undefined) vals.push(String(s.maximum + 1));
    return fc.constantFrom(...vals);
  }
  if (t.includes('number')) return fc.constantFrom('abc', 'NaN', 'Infinity', '1e400', '-1e400');
  if (t.includes('boolean')) return fc.constantFrom('maybe', '2', 'yes please');
  if (t.includes('string') && s.maxLength !== undefined && s.maxLength < 3000) return fc.constant('q'.repeat(s.maxLength + 1));
  return undefined;
}

// ---------------------------------------------------------------- requests

export interface FuzzRequest {
  op: Operation;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
  /** Hostile elements in the request (empty: valid-ish). */
  hostile: string[];
}

const DEEP_VALUE = '__fuzz_deep__';
const DEEP = `"${DEEP_VALUE}"`;

/** Paths to every leaf and container of a JSON value (keys as arrays). */
function pathsOf(v: unknown, at: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(at);
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) pathsOf(v[i], [...at, i], out);
  } else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) pathsOf(x, [...at, k], out);
  return out;
}

function setAt(root: unknown, path: (string | number)[], value: unknown): unknown {
  if (path.length === 0) return value;
  const clone = structuredClone(root) as Record<string | number, unknown>;
  let cur = clone;
  for (const k of path.slice(0, -1)) cur = cur[k] as Record<string | number, unknown>;
  cur[path[path.length - 1] as string] = value;
  return clone;
}

type BodyHostility = 'nul' | 'key' | 'deep' | 'json' | 'type' | 'required' | 'media';

const printable = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 60 });

/** Headers of any request: a random subset of ordinary and odd ones (never credentials). */
const extraHeaders = fc.record(
  {
    accept: fc.constantFrom(
      'application/json',
      '*/*',
      'text/html',
      'text/event-stream',
      'application/xml',
      'application/json, text/event-stream',
    ),
    'accept-encoding': fc.constantFrom('gzip', 'br', 'identity', 'gzip, deflate, br', 'zstd'),
    'idempotency-key': printable,
    'x-request-id': printable,
    'user-agent': printable,
    origin: fc.constantFrom('https://evil.example', 'null', 'http://localhost:3000'),
    'accept-language': printable,
    'if-none-match': printable,
    cookie: printable,
    'cf-connecting-ip': fc.constantFrom('1.2.3.4', '::1', 'garbage', '999.1.1.1'),
  },
  { requiredKeys: [] },
);

export interface Credentials {
  tenantKey: string;
  testKey: string;
  adminToken: string;
}

/**
 * One request for `op`. `mustRefuse`: at least one hostile element in a place the operation reads (so the
 * only right answer is a 4xx); otherwise valid-ish, sometimes with a hostile element too.
 */
export function requestArb(op: Operation, o: GenOpts, creds: Credentials, mustRefuse: boolean): fc.Arbitrary<FuzzRequest> {
  const pathParams = op.params.filter((p) => p.in === 'path');
  const queryParams = op.params.filter((p) => p.in === 'query');
  const typedQuery = queryParams.map((p) => [p, wrongTypeValue(p.schema)] as const).filter(([, a]) => a !== undefined);
  const intPath = pathParams.filter((p) => typesOf(p.schema).every((t) => t === 'integer'));
  const hasBody = op.body !== undefined;

  const kinds: string[] = ['query-escape'];
  if (pathParams.length) kinds.push('path');
  if (intPath.length) kinds.push('path-type');
  if (typedQuery.length) kinds.push('query-type');
  if (hasBody) kinds.push('body');
  if (op.auth !== 'none') kinds.push('auth');

  const pathValue = (p: Param) =>
    fc.oneof(
      ...(o.pool.length ? [fc.constantFrom(...o.pool)] : []),
      validish(p.schema, o, 0, p.name).map((v) => encodeURIComponent(String(v))),
      fc.constantFrom('1', '0', '-1', '999999999'),
    );
  const queryValue = (p: Param) =>
    validish(p.schema, o, 0, p.name).map((v) => encodeURIComponent(typeof v === 'object' ? JSON.stringify(v) : String(v)));

  return fc
    .record({
      pathValues: fc.tuple(...pathParams.map(pathValue)),
      query: fc.tuple(...queryParams.map((p) => fc.option(queryValue(p), { nil: undefined, freq: 2 }))),
      body: hasBody ? validish(op.body as Schema, o) : fc.constant(undefined),
      headers: extraHeaders,
      authChoice: fc.constantFrom('live', 'test', 'live', 'live'),
      hostileKinds: mustRefuse
        ? fc.subarray(kinds, { minLength: 1, maxLength: Math.min(2, kinds.length) })
        : fc.oneof({ weight: 9, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: fc.subarray(kinds, { minLength: 1, maxLength: 1 }) }),
      pick: fc.nat(),
      pick2: fc.nat(),
      hostilePath: hostilePathSegment,
      hostileQuery: hostileQueryValue,
      hostileString: hostileText,
      deepBy: fc.integer({ min: 33, max: 5000 }),
      bodyKind: fc.constantFrom<BodyHostility>('nul', 'nul', 'key', 'deep', 'json', 'type', 'required', 'media'),
      badJson: fc.constantFrom(
        '{',
        '{"a":',
        '[1,',
        '{"a" 1}',
        "{'a':1}",
        '\u0000',
        '{"a":1}}',
        'nul',
        '{"__proto__":{"x":1}}',
        '{"constructor":{"prototype":{"x":1}}}',
      ),
      authKind: fc.constantFrom('missing', 'garbage-key', 'bearer', 'wrong-admin', 'test-format'),
      typed: typedQuery.length ? fc.tuple(...typedQuery.map(([, a]) => a as fc.Arbitrary<string>)) : fc.constant([] as string[]),
    })
    .map((r) => {
      const hostile: string[] = [];
      const pv = [...r.pathValues] as string[];
      const q: [string, string][] = [];
      queryParams.forEach((p, i) => {
        const v = r.query[i];
        if (v !== undefined) q.push([p.name, v]);
      });
      let body: unknown = r.body;
      let rawBody: string | undefined;
      const headers: Record<string, string> = { ...r.headers };
      let auth = op.auth;

      // Replacing a typed value comes before adding a malformed one (which may share its name).
      const order = (k: string) => (k === 'query-type' ? 0 : 1);
      for (const kind of [...r.hostileKinds].sort((a, b) => order(a) - order(b))) {
        if (kind === 'path' && pv.length) {
          pv[r.pick % pv.length] = r.hostilePath;
          hostile.push(`path:${r.hostilePath.length > 20 ? `${r.hostilePath.length} chars` : r.hostilePath}`);
        } else if (kind === 'path-type' && intPath.length) {
          const p = intPath[r.pick % intPath.length] as Param;
          pv[pathParams.indexOf(p)] = ['abc', '1.5', '1e400', '-0x1'][r.pick2 % 4] as string;
          hostile.push(`path-type:${p.name}`);
        } else if (kind === 'query-escape') {
          const name = queryParams.length ? (queryParams[r.pick % queryParams.length] as Param).name : 'x';
          q.push([name, r.hostileQuery]);
          hostile.push(`query-escape:${name}=${r.hostileQuery}`);
        } else if (kind === 'query-type' && typedQuery.length) {
          const i = r.pick % typedQuery.length;
          const name = (typedQuery[i] as readonly [Param, unknown])[0].name;
          const v = encodeURIComponent(r.typed[i] as string);
          for (let j = q.length - 1; j >= 0; j--) if ((q[j] as [string, string])[0] === name) q.splice(j, 1);
          q.push([name, v]);
          hostile.push(`query-type:${name}`);
        } else if (kind === 'body' && hasBody) {
          const schema = op.body as Schema;
          const bk: BodyHostility =
            r.bodyKind === 'type' && typesOf(schema)[0] !== 'object'
              ? 'nul'
              : r.bodyKind === 'required' && !(schema.required?.length && body && typeof body === 'object')
                ? 'nul'
                : r.bodyKind;
          const paths = pathsOf(body);
          const at = paths[r.pick % paths.length] as (string | number)[];
          if (bk === 'nul') {
            // Replace a leaf (or the whole body when it has no leaves) by a string holding NUL or a lone surrogate.
            body =
              body !== null && typeof body === 'object' && at.length === 0
                ? { ...(body as object), fuzz: r.hostileString }
                : setAt(body, at, r.hostileString);
          } else if (bk === 'key') {
            body = { ...(body && typeof body === 'object' && !Array.isArray(body) ? body : {}), [`k${r.hostileString}`]: 1 };
          } else if (bk === 'deep') {
            body = at.length === 0 ? { fuzz: DEEP_VALUE } : setAt(body, at, DEEP_VALUE);
          } else if (bk === 'json') {
            rawBody = r.badJson;
          } else if (bk === 'type') {
            rawBody = ['[]', '"text"', '42', 'null', 'true'][r.pick2 % 5];
          } else if (bk === 'required') {
            const req = schema.required as string[];
            const { [req[r.pick2 % req.length] as string]: _gone, ...rest } = body as Record<string, unknown>;
            body = rest;
          } else if (bk === 'media') {
            headers['content-type'] = [
              'application/xml',
              'application/x-www-form-urlencoded',
              'image/png',
              'multipart/form-data; boundary=x',
            ][r.pick2 % 4] as string;
          }
          hostile.push(`body:${bk}`);
        } else if (kind === 'auth' && auth !== 'none') {
          auth = 'none';
          if (r.authKind === 'garbage-key') headers['x-api-key'] = 'sk_live_00000000000000000000000000000000';
          if (r.authKind === 'test-format') headers['x-api-key'] = "' OR 1=1 --";
          if (r.authKind === 'bearer') headers.authorization = 'Bearer garbage.token.value';
          if (r.authKind === 'wrong-admin') headers['x-admin-token'] = 'adm_00000000000000000000000000000000';
          hostile.push(`auth:${r.authKind}`);
        }
      }

      if (auth === 'tenant') headers['x-api-key'] = r.authChoice === 'test' ? creds.testKey : creds.tenantKey;
      if (auth === 'admin') headers['x-admin-token'] = creds.adminToken;

      let i = 0;
      const path = op.template.replace(/\{[^}]+\}/g, () => pv[i++] ?? '1');
      const qs = q.map(([k, v]) => `${encodeURIComponent(k)}=${v}`).join('&');
      if (hasBody) {
        if (rawBody === undefined) {
          rawBody = JSON.stringify(body ?? {});
          if (rawBody.includes(DEEP))
            rawBody = rawBody.replace(DEEP, `${'{"d":['.repeat(Math.ceil(r.deepBy / 2))}1${']}'.repeat(Math.ceil(r.deepBy / 2))}`);
        }
        headers['content-type'] ??= 'application/json';
      }
      return { op, method: op.method, path: qs ? `${path}?${qs}` : path, headers, body: rawBody, hostile };
    });
}
