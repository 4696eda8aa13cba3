import type { OperationSpec } from '@imagegen/api-schemas';
import { abbreviateInvitationToken } from '@imagegen/operations';
import type { Principal } from '@imagegen/platform';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { operationOf } from './operation-policy.js';
import type { GatewayDeps } from './types.js';

/**
 * The audit log's one hook (issue 40, item 5), driven by the operation catalogue: every successful (2xx) write
 * (not GET) of an operation whose auth is admin or super_admin, the invitation acceptance (it creates an admin
 * user), and the tenants' own security-relevant writes (webhook endpoints: create, update, delete, replay) are
 * recorded in tenancy's append-only audit_log (RecordAudit) with the actor (the principal), the action (the
 * operationId), the target (tenant and resource), the request id and the fields the request set, secrets redacted.
 *
 * The record is written before the answer leaves (onSend, awaited): a client that has its answer finds the record.
 * A record that cannot be written (tenancy down between the write and the record, which live in the same
 * database for admin writes) is logged at warn with everything it held, and the answer is still sent: the write
 * happened, and failing its answer would make the client retry a write that was done (a second API key, a 409).
 * The OAuth client registrations and token revocations are recorded by the oauth service itself.
 */

/** The tenant operations recorded besides every admin write (by operationId). */
export const AUDITED_TENANT_OPERATIONS = new Set([
  'createWebhook',
  'updateWebhook',
  'deleteWebhook',
  'deleteWebhooksByIdOrUrl',
  'replayWebhookDelivery',
]);
/** Unauthenticated writes recorded anyway: accepting an invitation creates an admin user. */
const AUDITED_OPEN_OPERATIONS = new Set(['acceptInvitation']);

/** How long the answer waits for its record. */
const RECORD_TIMEOUT_MS = 5000;

export function isAudited(method: string, spec: OperationSpec | undefined): spec is OperationSpec {
  if (!spec || method === 'GET' || method === 'HEAD') return false;
  if (spec.auth === 'admin' || spec.auth === 'super_admin') return true;
  return AUDITED_TENANT_OPERATIONS.has(spec.operationId) || AUDITED_OPEN_OPERATIONS.has(spec.operationId);
}

export const REDACTED = '[redacted]';

/**
 * A field holding a secret: passwords, secrets, tokens, credentials, and keys (provA_api_key, api_key, a pool's
 * keys), but not names about keys (key_name, api_keys: the names and types of new keys).
 */
export function isSecretName(name: string): boolean {
  return /password|secret|token|credential|key$|^keys$/i.test(name);
}

/** A URL without its user info, query and fragment (they may hold a credential). */
function bareUrl(value: string): string {
  try {
    const u = new URL(value);
    const stripped = u.username || u.password || u.search || u.hash;
    return `${u.origin}${u.pathname}${stripped ? ' [query redacted]' : ''}`;
  } catch {
    return REDACTED;
  }
}

/**
 * The fields as recorded: every value under a secret-named field is "[redacted]" (an object keeps its keys, so
 * the record says which provider's credentials changed, never their text); null stays null (a removal); URLs
 * lose their user info and query.
 */
export function redact(value: unknown, secret = false, name = ''): unknown {
  if (value === null || value === undefined) return value ?? null;
  if (Array.isArray(value)) return value.map((v) => redact(v, secret, name));
  if (typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, redact(v, secret || isSecretName(k), k)]),
    );
  }
  if (secret) return REDACTED;
  if (typeof value === 'string' && /(^|_)url$/i.test(name)) return bareUrl(value);
  return value;
}

/** The created resource of an operation, read from its answer's data. */
const CREATED: Record<string, (data: any) => unknown> = {
  createTenant: (d) => d?.tenant?.tenantId,
  createApiKey: (d) => d?.keyId,
  createInvitation: (d) => (typeof d?.token === 'string' ? abbreviateInvitationToken(d.token) : undefined),
  createWebhook: (d) => d?.id,
  replayWebhookDelivery: (d) => d?.id,
  acceptInvitation: (d) => d?.user?.userId,
};

export interface AuditEntry {
  action: string;
  tenantId?: string;
  resourceId?: string;
  changes: Record<string, unknown>;
  anonymousActor?: string;
}

/** What one answered request records: action, target and changes (pure, for tests). */
export function auditEntry(
  spec: OperationSpec,
  req: { params?: unknown; query?: unknown; body?: unknown; principal?: Principal | null },
  answer: unknown,
): AuditEntry {
  const params = { ...((req.params as Record<string, string> | undefined) ?? {}) };
  const body = req.body && typeof req.body === 'object' && !Array.isArray(req.body) ? (req.body as Record<string, unknown>) : {};
  const data = (answer as { data?: unknown } | undefined)?.data;
  // A path token is an invitation's, a credential until accepted or revoked: recorded abbreviated.
  if (params.token) params.token = abbreviateInvitationToken(params.token);
  const tenantFromBody = typeof body.tenant_id === 'string' ? body.tenant_id.trim().toLowerCase() : undefined;
  const tenantId = params.tenantId ?? tenantFromBody ?? req.principal?.tenantId;
  const pathIds = Object.entries(params)
    .filter(([k]) => k !== 'tenantId')
    .map(([, v]) => v);
  const created = CREATED[spec.operationId]?.(data);
  const resourceId = [...pathIds, ...(created !== undefined && created !== null ? [String(created)] : [])].join('/') || undefined;
  const changes: Record<string, unknown> = {};
  if (spec.query && req.query && typeof req.query === 'object') Object.assign(changes, req.query);
  Object.assign(changes, body);
  return {
    action: spec.operationId,
    tenantId: spec.operationId === 'createTenant' ? ((CREATED.createTenant(data) as string | undefined) ?? tenantId) : tenantId,
    resourceId,
    changes: redact(changes) as Record<string, unknown>,
    anonymousActor: spec.operationId === 'acceptInvitation' ? `invitation:${params.token ?? ''}` : undefined,
  };
}

function answerOf(payload: unknown): unknown {
  if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return undefined;
  try {
    return JSON.parse(payload.toString());
  } catch {
    return undefined;
  }
}

export function registerAudit(app: FastifyInstance, deps: GatewayDeps): void {
  const tenancy = deps.clients.tenancy;
  app.addHook('onSend', async (req: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    if (reply.statusCode < 200 || reply.statusCode >= 300) return payload;
    // An Idempotency-Key replay repeats an answer; its write was recorded once, the first time.
    if (reply.getHeader('idempotent-replayed')) return payload;
    const spec = operationOf(req.method, req.routeOptions.url ?? '');
    if (!isAudited(req.method, spec)) return payload;
    const entry = auditEntry(spec, req, CREATED[spec.operationId] ? answerOf(payload) : undefined);
    const principal: Principal = req.principal ?? { requestId: req.id, source: 'admin' };
    const record = {
      action: entry.action,
      tenantId: entry.tenantId,
      resourceId: entry.resourceId,
      changesJson: JSON.stringify(entry.changes),
      anonymousActor: entry.anonymousActor,
    };
    try {
      await tenancy.recordAudit(record, { ...principal, requestId: req.id }, { timeoutMs: RECORD_TIMEOUT_MS });
    } catch (err) {
      // Loud: an audit record is missing. Everything it held is in this line (no secret: changes are redacted).
      req.log.warn(
        { err, audit: { ...record, actor: principal.adminUserId ?? (principal.adminRole ? 'admin-token' : principal.tenantId) } },
        'AUDIT RECORD NOT WRITTEN: the write succeeded and was answered, its audit record is missing',
      );
    }
    return payload;
  });
}
