/**
 * The audit log (issue 40, item 5): RecordAudit appends one record, its actor taken from the caller's principal
 * (never from the message), ListAuditLog reads them newest first with keyset paging. Nothing updates or deletes
 * a record but the retention sweep (service.ts).
 */
import { AUDIT_LOG_LIMIT_DEFAULT, AUDIT_LOG_LIMIT_MAX } from '@imagegen/api-schemas/vocab';
import type { AuditRecord as AuditRecordMessage } from '@imagegen/contracts/tenancy/v1/tenancy';
import { badRequest, invalidPayload, type Principal } from '@imagegen/platform';
import * as audit from '../repositories/audit-log.js';
import type { HandlerContext, TenancyHandlers } from './context.js';

/** The actor of a record, from the principal the gateway (or an internal caller) forwarded. */
export function actorOf(p: Principal, anonymous?: string): Pick<audit.AuditRecord, 'actorType' | 'actor' | 'actorRole'> {
  if (p.adminUserId) return { actorType: 'admin_user', actor: p.adminUserId, actorRole: p.adminRole ?? null };
  if (p.adminRole) return { actorType: 'admin_token', actor: 'admin-token', actorRole: p.adminRole };
  if (p.tenantId) return { actorType: 'tenant', actor: p.tenantId, actorRole: null };
  return { actorType: 'anonymous', actor: anonymous || 'anonymous', actorRole: null };
}

/** An opaque cursor: the last record's time (ms) and id. */
export function encodeCursor(r: { at: Date; id: string }): string {
  return Buffer.from(`${r.at.getTime()}.${r.id}`).toString('base64url');
}

export function decodeCursor(cursor: string): { at: Date; id: string } {
  const m = /^(\d{1,15})\.(\d{1,19})$/.exec(Buffer.from(cursor, 'base64url').toString());
  if (!m) throw badRequest('Invalid cursor');
  return { at: new Date(Number(m[1])), id: m[2] };
}

function time(details: string[], name: string, value: string | undefined): Date | undefined {
  if (value === undefined || value === '') return undefined;
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) details.push(`${name} must be an ISO 8601 date-time`);
  return d;
}

function present(r: audit.AuditRecord): AuditRecordMessage {
  return {
    id: r.id,
    at: r.at.toISOString(),
    actorType: r.actorType,
    actor: r.actor,
    actorRole: r.actorRole ?? undefined,
    action: r.action,
    tenantId: r.tenantId ?? undefined,
    resourceId: r.resourceId ?? undefined,
    requestId: r.requestId,
    source: r.source,
    changesJson: JSON.stringify(r.changes),
  };
}

export function auditLogHandlers(c: HandlerContext): Pick<TenancyHandlers, 'recordAudit' | 'listAuditLog'> {
  const { sql } = c;
  return {
    async recordAudit(req, ctx) {
      const details: string[] = [];
      if (!req.action) details.push('action is required');
      let changes: Record<string, unknown> = {};
      try {
        const parsed = req.changesJson ? JSON.parse(req.changesJson) : {};
        if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) details.push('changes_json must be a JSON object');
        else changes = parsed;
      } catch {
        details.push('changes_json must be a JSON object');
      }
      if (details.length) throw invalidPayload(details);
      const p = ctx.principal;
      const r = await audit.insertAuditRecord(sql, {
        ...actorOf(p, req.anonymousActor),
        action: req.action,
        tenantId: req.tenantId || p.tenantId || null,
        resourceId: req.resourceId || null,
        requestId: p.requestId,
        source: p.source ?? '',
        changes,
      });
      return present(r);
    },

    async listAuditLog(req) {
      const details: string[] = [];
      const from = time(details, 'from', req.from);
      const to = time(details, 'to', req.to);
      const limit = req.limit || AUDIT_LOG_LIMIT_DEFAULT;
      if (limit < 1 || limit > AUDIT_LOG_LIMIT_MAX) details.push(`limit must be between 1 and ${AUDIT_LOG_LIMIT_MAX}`);
      if (details.length) throw invalidPayload(details);
      const after = req.cursor ? decodeCursor(req.cursor) : undefined;
      const page = await audit.listAuditLog(
        sql,
        { actor: req.actor || undefined, tenantId: req.tenantId || undefined, action: req.action || undefined, from, to, after },
        limit,
      );
      const last = page.records.at(-1);
      return { records: page.records.map(present), nextCursor: page.hasMore && last ? encodeCursor(last) : undefined };
    },
  };
}
