import { auditEntry, auditRecord, isAudited, namesCreated, RECORD_TIMEOUT_MS } from '@imagegen/operations';
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
 * The OAuth client registrations and token revocations are recorded by the oauth service itself, the MCP tools'
 * writes by the mcp service; what a record holds is libs/operations/src/policies/audit.ts.
 */

export { auditEntry, isAudited, isSecretName, REDACTED, redact } from '@imagegen/operations';

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
    const entry = auditEntry(spec, req, namesCreated(spec) ? answerOf(payload) : undefined);
    const principal: Principal = req.principal ?? { requestId: req.id, source: 'admin' };
    const record = auditRecord(entry);
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
