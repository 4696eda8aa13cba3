import type { OperationSpec } from '@imagegen/api-schemas';
import type { Principal } from '@imagegen/platform';
import { abbreviateInvitationToken } from '../present-admin.js';

/**
 * What the audit log records of one answered write (issue 40, item 5), for every door a write comes through: the
 * gateway's hook (services/gateway/src/audit.ts) and the MCP tools (services/mcp/src/tools/framework.ts). Which
 * writes are recorded, the record's action, target and changes, and the redaction of secrets; pure.
 */

/** The tenant operations recorded besides every admin write (by operationId). */
export const AUDITED_TENANT_OPERATIONS = new Set([
  'createWebhook',
  'updateWebhook',
  'deleteWebhook',
  'deleteWebhooksByIdOrUrl',
  'replayWebhookDelivery',
  // A tenant's export of all its data (issue 40, item 4).
  'createExport',
]);
/** Unauthenticated writes recorded anyway: accepting an invitation creates an admin user. */
const AUDITED_OPEN_OPERATIONS = new Set(['acceptInvitation']);

/** How long the answer waits for its record. */
export const RECORD_TIMEOUT_MS = 5000;

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
  createExport: (d) => d?.exportId,
  createTenantExport: (d) => d?.exportId,
};

/** What an operation's answer adds to its record's changes: what a purge removed (issue 40, item 4). */
const OUTCOME: Record<string, (data: any) => Record<string, unknown> | undefined> = {
  purgeTenant: (d) =>
    d ? { rowsRemoved: d.rowsRemoved, objectsRemoved: d.objectsRemoved, redisKeysRemoved: d.redisKeysRemoved } : undefined,
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
  const outcome = OUTCOME[spec.operationId]?.(data);
  if (outcome) changes.outcome = outcome;
  return {
    action: spec.operationId,
    tenantId: spec.operationId === 'createTenant' ? ((CREATED.createTenant(data) as string | undefined) ?? tenantId) : tenantId,
    resourceId,
    changes: redact(changes) as Record<string, unknown>,
    anonymousActor: spec.operationId === 'acceptInvitation' ? `invitation:${params.token ?? ''}` : undefined,
  };
}

/** The RecordAudit request of an entry. */
export function auditRecord(entry: AuditEntry) {
  return {
    action: entry.action,
    tenantId: entry.tenantId,
    resourceId: entry.resourceId,
    changesJson: JSON.stringify(entry.changes),
    anonymousActor: entry.anonymousActor,
  };
}

/** Whether an answer's data names the resource the write created (the gateway parses only those answers). */
export const namesCreated = (spec: OperationSpec) => Object.hasOwn(CREATED, spec.operationId) || Object.hasOwn(OUTCOME, spec.operationId);
