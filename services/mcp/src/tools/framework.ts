import { randomUUID } from 'node:crypto';
import { ID_MAX, INT32_MAX, OPERATIONS, type OperationKey } from '@imagegen/api-schemas';
import type { Clients } from '@imagegen/operations';
import {
  auditEntry,
  auditRecord,
  concurrencyRefusal,
  holdClaim,
  IDEMPOTENCY_KEY_PATTERN,
  IDEMPOTENCY_LEASE_MS,
  IDEMPOTENCY_TTL_MS,
  type IdempotencyStore,
  idempotencyRefusal,
  isAudited,
  keepsIdempotentAnswer,
  RECORD_TIMEOUT_MS,
  requestFingerprint,
  type SlotStore,
} from '@imagegen/operations';
import type { Scope } from '@imagegen/platform';
import { AppError, type Logger, type Principal } from '@imagegen/platform';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { type ZodRawShape, z } from 'zod';
import type { McpAuth } from '../auth.js';
import type { ToolLimiter } from '../rate-limit.js';
import { TOOL_OUTPUTS } from './outputs.js';

export type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** An image returned as MCP image content (thumbnail or original bytes). */
export interface ToolImage {
  data: Buffer;
  mimeType: string;
}

export interface ToolOutput {
  /** The JSON result (REST field names); sent as text and as structuredContent. */
  data: Record<string, unknown>;
  images?: ToolImage[];
}

export interface ToolDeps {
  clients: Clients;
  logger: Logger;
  publicBaseUrl: string;
  /** In-process registry of async generate_image runs (wait_for_execution returns their full result). */
  /** Per-tenant limits of tool calls (rate-limit.ts). */
  limiter?: ToolLimiter;
  /** Records of `idempotency_key` arguments (Redis when REDIS_URL is set; memory otherwise). */
  idempotency?: IdempotencyStore;
  /**
   * The tenant's generations in flight (TENANT_MAX_GENERATIONS_IN_FLIGHT), in the gateway's slots: a generation
   * or upload tool holds one while it runs (an async one while it is submitted: the job queue caps its running). Absent
   * or max 0: no cap.
   */
  generationSlots?: { store: SlotStore; max: number };
}

/**
 * Tools whose operation creates or bills (the catalogue's `idempotent`) take an optional `idempotency_key` argument
 * with the REST API's Idempotency-Key semantics (services/gateway/src/idempotency.ts): the first result is kept per
 * tenant and key for 24 h and returned again (with `_meta["imagegen/idempotent-replayed"]: true`) for the same call;
 * the same key with other arguments is a 422 tool error, a call while the first runs a 409 tool error.
 */
const idempotencyKeyArg = z
  .string()
  .regex(IDEMPOTENCY_KEY_PATTERN, 'idempotency_key must be 1-255 visible ASCII characters')
  .optional()
  .describe('Makes a retry safe: the same key with the same arguments returns the first result instead of running again (24 h)');

export interface ToolContext {
  /** The principal forwarded to gRPC: tenant, key type, scopes, session_id argument, source 'mcp'. */
  principal: Principal;
  auth: McpAuth;
  deps: ToolDeps;
  extra: Extra;
  /** Sends notifications/progress when the client gave a progressToken (no-op otherwise). */
  progress(progress: number, total?: number, message?: string): Promise<void>;
}

export interface ToolDef<S extends ZodRawShape = ZodRawShape> {
  name: string;
  /** One line. */
  description: string;
  /** Scopes an OAuth token needs (all of them): the catalogue's for the operation the tool performs. API keys have every scope. */
  scopes: Scope[];
  /** Alternatively: any one of these is enough. */
  anyScopes?: Scope[];
  /** The catalogue's: the tool takes an idempotency_key (its operation creates or bills). */
  idempotent?: boolean;
  /** The catalogue's rate class of its operation: counted against the generation or upload bucket and the tenant's cap. */
  rate?: 'generation' | 'upload';
  input: S;
  /** The error text of invalid arguments when the REST twin has its own (no details then); default 'Invalid request payload' + details. */
  invalidArguments?: string;
  annotations?: ToolAnnotations;
  run(args: z.infer<z.ZodObject<S>>, ctx: ToolContext): Promise<ToolOutput>;
}

/**
 * A tool as written: the REST operation it performs (a key of the catalogue, OPERATIONS), whose scopes it then
 * requires, or, for a tool with no REST twin, its own scopes.
 */
export type ToolSpec<S extends ZodRawShape = ZodRawShape> = Omit<ToolDef<S>, 'scopes' | 'idempotent' | 'rate'> &
  ({ operation: OperationKey; scopes?: never } | { operation?: never; scopes: Scope[] });

export function defineTool<S extends ZodRawShape>({ operation, ...def }: ToolSpec<S>): ToolDef<S> & { operation?: OperationKey } {
  if (!operation) return def as ToolDef<S>;
  const spec = OPERATIONS[operation];
  if (!spec?.scopes) throw new Error(`${def.name}: ${operation} is not a tenant operation of the catalogue`);
  return { ...def, operation, scopes: spec.scopes, idempotent: spec.idempotent === true, rate: spec.rate };
}

// ---- results ----

export function toolResult(out: ToolOutput): CallToolResult {
  const content: CallToolResult['content'] = [{ type: 'text', text: JSON.stringify(out.data, null, 2) }];
  for (const img of out.images ?? []) content.push({ type: 'image', data: img.data.toString('base64'), mimeType: img.mimeType });
  return { content, structuredContent: out.data };
}

/** Where an error result carries its status and REST error body (`{status, error, details?, ...}`). */
export const ERROR_META = 'imagegen/error';

/** The `{status, error, details?, ...}` of an error result (undefined for a success). */
export const errorOf = (r: CallToolResult): ({ status: number; error: string } & Record<string, unknown>) | undefined =>
  r.isError ? (r._meta?.[ERROR_META] as { status: number; error: string } & Record<string, unknown>) : undefined;

/**
 * An MCP tool error carrying the spec's error text (and details) of the failed call. The text goes to the
 * model; the status and body go in `_meta`, not in structuredContent: every tool publishes an outputSchema, and
 * the SDK client validates any structuredContent against it, an error's too (the MCP Inspector checks successes
 * only and shows `_meta`). An outputSchema admitting the error form would make every field of every result
 * optional for the clients that generate types from it.
 */
export function toolError(status: number, body: { error: string; details?: unknown; [k: string]: unknown }): CallToolResult {
  let text = body.error;
  if (Array.isArray(body.details) && body.details.length)
    text += `\n${body.details.map((d) => `- ${typeof d === 'string' ? d : JSON.stringify(d)}`).join('\n')}`;
  else if (body.details !== undefined) text += `\n${JSON.stringify(body.details)}`;
  return { content: [{ type: 'text', text }], isError: true, _meta: { [ERROR_META]: { status, ...body } } };
}

export function errorResult(err: unknown, logger: Logger, tool: string): CallToolResult {
  if (err instanceof AppError) return toolError(err.status, err.body);
  const requestId = randomUUID();
  logger.error({ err, tool, requestId }, 'mcp tool failed');
  return toolError(500, { error: 'Internal server error', requestId });
}

// ---- input validation with the spec's wording ("prompt is required") ----

function pathOf(path: (string | number)[]): string {
  return path.reduce<string>((acc, p) => (typeof p === 'number' ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');
}

export function formatIssue(i: z.ZodIssue): string {
  const field = pathOf(i.path) || 'arguments';
  switch (i.code) {
    case 'invalid_type':
      if (i.received === 'undefined') return `${field} is required`;
      return `${field} must be ${i.expected === 'integer' ? 'an integer' : `a${/^[aeiou]/.test(i.expected) ? 'n' : ''} ${i.expected}`}`;
    case 'too_small':
      if (i.type === 'string') return i.minimum === 1 ? `${field} cannot be empty` : `${field} must be at least ${i.minimum} characters`;
      if (i.type === 'array') return `${field} must have at least ${i.minimum} item${i.minimum === 1 ? '' : 's'}`;
      return `${field} must be >= ${i.minimum}`;
    case 'too_big':
      if (i.type === 'string') return `${field} must be at most ${i.maximum} characters`;
      if (i.type === 'array') return `${field} must have at most ${i.maximum} items`;
      return `${field} must be <= ${i.maximum}`;
    case 'invalid_enum_value':
      return `${field} must be one of: ${i.options.join(', ')}`;
    case 'unrecognized_keys':
      // The REST API's wording for additionalProperties: one line per key (formatIssues splits them).
      return i.keys.map((k) => `${pathOf([...i.path, k])} is not allowed`).join('\n');
    default:
      return `${field}: ${i.message}`;
  }
}

/** The details lines of a failed validation (one per problem, one per unknown argument). */
export const formatIssues = (issues: z.ZodIssue[]): string[] => issues.flatMap((i) => formatIssue(i).split('\n'));

/**
 * What an OAuth token with `scopes` lacks for `tool`: the scopes to ask for (every missing required one, or
 * the alternatives when none of `anyScopes` is held), or undefined when the token may call it.
 */
export function missingScopes(tool: Pick<ToolDef, 'scopes' | 'anyScopes'>, scopes: readonly string[]): Scope[] | undefined {
  const missing = tool.scopes.filter((s) => !scopes.includes(s));
  const anyOk = !tool.anyScopes?.length || tool.anyScopes.some((s) => scopes.includes(s));
  if (!missing.length && anyOk) return undefined;
  return [...missing, ...(anyOk ? [] : (tool.anyScopes ?? []))];
}

/** Registers the tools on an McpServer. */
export function registerTools(server: McpServer, tools: ToolDef[], deps: ToolDeps, authOf: (extra: Extra) => McpAuth) {
  // The SDK validates arguments before calling a tool, with a generic message; here the tool itself
  // checks its scope first and then validates with its zod schema (the schema the SDK publishes in
  // tools/list), reporting problems as the REST API does: 'Invalid request payload' + details.
  Object.assign(server, { validateToolInput: async (_tool: unknown, args: unknown) => args });
  // Strict: an argument the tool does not know (a misspelt `negativ_prompt`) is refused like the REST API's
  // additionalProperties: false, never silently dropped.
  const inputOf = (t: ToolDef): ZodRawShape => (t.idempotent ? { ...t.input, idempotency_key: idempotencyKeyArg } : t.input);
  const schemas = new Map(tools.map((t) => [t.name, z.object(inputOf(t)).strict()]));

  for (const tool of tools) {
    // openWorldHint defaults to true in MCP: only tools that reach outside the platform (image providers,
    // public URLs, webhook receivers) say so; every other tool works on the tenant's own data.
    const annotations: ToolAnnotations = { openWorldHint: false, ...tool.annotations };
    const outputSchema = TOOL_OUTPUTS[tool.name];
    if (!outputSchema) throw new Error(`tool ${tool.name} has no output schema (outputs.ts)`);
    server.registerTool(tool.name, { description: tool.description, inputSchema: inputOf(tool), outputSchema, annotations }, (async (
      args: Record<string, unknown>,
      extra: Extra,
    ): Promise<CallToolResult> => {
      const auth = authOf(extra);
      // (Over HTTP an OAuth token without the scope is answered 403 insufficient_scope before this; see http.ts.)
      const missing = auth.scopes ? missingScopes(tool, auth.scopes) : undefined;
      if (missing) {
        const required = missing.filter((s) => tool.scopes.includes(s));
        return toolError(403, {
          error: `Insufficient scope: ${tool.name} requires ${required.length ? required.join(' ') : `one of ${missing.join(', ')}`}`,
          required_scopes: tool.scopes.length ? tool.scopes : tool.anyScopes,
        });
      }
      const limit = await deps.limiter?.(auth.tenantId, auth.rateLimitPerMinute, tool.rate);
      if (limit && !limit.allowed) {
        return toolError(429, { error: `Rate limit exceeded. Try again in ${limit.retryAfter} seconds.`, retryAfter: limit.retryAfter });
      }
      const parsed = await (schemas.get(tool.name) as z.ZodTypeAny).safeParseAsync(args ?? {});
      if (!parsed.success) {
        return tool.invalidArguments
          ? toolError(400, { error: tool.invalidArguments })
          : toolError(400, { error: 'Invalid request payload', details: formatIssues(parsed.error.issues) });
      }
      const { idempotency_key: idempotencyKey, ...toolArgs } = parsed.data as Record<string, unknown>;
      args = toolArgs;
      const principal: Principal = {
        requestId: auth.requestId ? `${auth.requestId}:${randomUUID().slice(0, 8)}` : randomUUID(),
        tenantId: auth.tenantId,
        keyType: auth.keyType,
        scopes: auth.scopes,
        sessionId: typeof args.session_id === 'string' ? args.session_id : undefined,
        source: 'mcp',
      };
      const progressToken = extra._meta?.progressToken;
      const ctx: ToolContext = {
        principal,
        auth,
        deps,
        extra,
        progress: async (progress, total, message) => {
          if (progressToken === undefined) return;
          await extra
            .sendNotification({ method: 'notifications/progress', params: { progressToken, progress, total, message } })
            .catch(() => {});
        },
      };
      const call = async (): Promise<CallToolResult> => {
        // After the idempotency check (a replay holds no slot), as the gateway takes its slot after validation.
        const slots = deps.generationSlots;
        const capped = slots && slots.max > 0 && tool.rate !== undefined;
        const slot = capped ? await slots.store.acquire(`generation:${auth.tenantId}`, slots.max) : undefined;
        if (capped && !slot) {
          const refusal = concurrencyRefusal('generation', slots.max);
          return toolError(refusal.status, refusal.body);
        }
        try {
          const out = await tool.run(args as never, ctx);
          await recordAudit(tool, args as Record<string, unknown>, out, ctx);
          return toolResult(out);
        } catch (err) {
          return errorResult(err, deps.logger, tool.name);
        } finally {
          slot?.release();
        }
      };
      if (typeof idempotencyKey !== 'string' || !deps.idempotency || !auth.tenantId) return call();
      return idempotent(deps.idempotency, deps.logger, `mcp:${auth.tenantId}:${idempotencyKey}`, tool.name, args, call);
    }) as never);
  }
}

/**
 * The audit record of a tool's successful write, as the gateway records the same operation over REST (issue 40
 * item 5: the tenants' webhook writes): its path parameters are the arguments of the same names, its changes the
 * others. A record that cannot be written is logged at warn with everything it held; the answer stands.
 */
async function recordAudit(tool: ToolDef & { operation?: OperationKey }, args: Record<string, unknown>, out: ToolOutput, ctx: ToolContext) {
  if (!tool.operation) return;
  const [method, path] = tool.operation.split(' ');
  const spec = OPERATIONS[tool.operation];
  if (!isAudited(method, spec)) return;
  const names = [...path.matchAll(/:(\w+)/g)].map((m) => m[1]);
  const params = Object.fromEntries(names.filter((n) => args[n] !== undefined).map((n) => [n, String(args[n])]));
  const { idempotency_key: _key, ...rest } = args;
  const body = Object.fromEntries(Object.entries(rest).filter(([k]) => !names.includes(k)));
  const record = auditRecord(auditEntry(spec, { params, body, principal: ctx.principal }, out.data));
  try {
    await ctx.deps.clients.tenancy.recordAudit(record, ctx.principal, { timeoutMs: RECORD_TIMEOUT_MS });
  } catch (err) {
    ctx.deps.logger.warn(
      { err, audit: { ...record, actor: ctx.principal.tenantId } },
      'AUDIT RECORD NOT WRITTEN: the write succeeded and was answered, its audit record is missing',
    );
  }
}

/** Runs a tool call under an idempotency key (a tool whose operation is idempotent). */
async function idempotent(
  store: IdempotencyStore,
  logger: Logger,
  id: string,
  tool: string,
  args: Record<string, unknown>,
  call: () => Promise<CallToolResult>,
): Promise<CallToolResult> {
  const fingerprint = requestFingerprint(tool, JSON.stringify(args));
  let claim: Awaited<ReturnType<IdempotencyStore['claim']>>;
  try {
    claim = await store.claim(id, fingerprint, IDEMPOTENCY_LEASE_MS);
  } catch (err) {
    logger.warn({ err }, 'idempotency store unavailable');
    return toolError(503, { error: 'Service temporarily unavailable' });
  }
  if (claim.state === 'mismatch' || claim.state === 'in_flight') {
    const refusal = idempotencyRefusal(claim, 'send a new idempotency_key for a call with another tool or other arguments');
    return toolError(refusal.status, refusal.body);
  }
  if (claim.state === 'done') {
    const replayed = JSON.parse(claim.response.body) as CallToolResult;
    return { ...replayed, _meta: { ...replayed._meta, 'imagegen/idempotent-replayed': true } };
  }
  const stopHolding = holdClaim(store, id, claim.owner, logger);
  let result: CallToolResult | undefined;
  try {
    result = await call();
    return result;
  } finally {
    stopHolding();
    const status = result?.isError ? Number(errorOf(result)?.status ?? 500) : 200;
    const settle =
      result && keepsIdempotentAnswer(status)
        ? store.complete(id, claim.owner, fingerprint, { status, body: JSON.stringify(result) }, IDEMPOTENCY_TTL_MS)
        : store.release(id, claim.owner);
    await settle.catch((err) => logger.warn({ err }, 'could not record the idempotent tool result'));
  }
}

// ---- schema helpers ----

// Bounds of the gRPC wire types (@imagegen/api-schemas): paging is int32, ids and byte sizes int64 read back as
// safe integers. A larger number cannot be encoded (the call would fail as an internal error), so the schemas refuse it.
export { ID_MAX, INT32_MAX };

export const s = {
  id: (what: string) => z.number().int().min(1).max(ID_MAX).describe(what),
  identifier: (what: string) =>
    z.union([z.number().int().min(1).max(ID_MAX), z.string().min(1).max(200)]).describe(`${what}: numeric id or exact name`),
  limit: (def: number, max: number) => z.number().int().min(1).max(max).optional().describe(`Page size (default ${def}, max ${max})`),
  offset: () => z.number().int().min(0).max(INT32_MAX).optional().describe('Items to skip (default 0)'),
};

export const idString = (v: string | number) => String(v);
