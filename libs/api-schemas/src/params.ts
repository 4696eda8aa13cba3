import { z } from 'zod';
import {
  AUDIT_FILTER_MAX,
  AUDIT_LOG_LIMIT_DEFAULT,
  AUDIT_LOG_LIMIT_MAX,
  CURSOR_MAX,
  ID_MAX,
  KEY_NAME_MAX,
  SESSION_ID_MAX,
  TENANT_ID_MAX,
  WEBHOOK_DELIVERIES_LIMIT_DEFAULT,
  WEBHOOK_DELIVERIES_LIMIT_MAX,
  WEBHOOK_URL_MAX,
} from './vocab.js';

/** The path parameters and the small queries of the REST routes, defined once (unknown query parameters are ignored). */

/** `:id` of an image: a positive int64. */
export const ImageIdParams = z.object({ id: z.number().int().min(1).max(ID_MAX) }).passthrough();
/** `:id` whose service reports a malformed id with its own text (style presets, search presets, webhooks). */
export const IdParams = z.object({ id: z.string() }).passthrough();
/** `:identifier`: a numeric id or a URL-encoded name (characters, products, scenes). */
export const IdentifierParams = z.object({ identifier: z.string().describe('numeric id or URL-encoded name') }).passthrough();
export const SessionParams = z.object({ sessionId: z.string().min(1).max(SESSION_ID_MAX) }).passthrough();
export const ExecutionParams = z.object({ executionId: z.string().min(1).max(100) }).passthrough();
export const TenantParams = z.object({ tenantId: z.string().min(1).max(TENANT_ID_MAX) }).passthrough();
export const ApiKeyParams = TenantParams.extend({ keyRef: z.string().min(1).max(KEY_NAME_MAX) }).passthrough();
export const UserParams = z.object({ userId: z.string().min(1).max(64) }).passthrough();
export const InvitationParams = z.object({ token: z.string().min(1).max(200) }).passthrough();

/** GET /admin/invitations. */
export const InvitationListQuery = z.object({ status: z.enum(['pending', 'accepted', 'revoked', 'expired']).optional() }).passthrough();

/** GET /admin/audit-log: filters (all optional, combined with AND) and the keyset cursor, newest first. */
export const AuditLogQuery = z
  .object({
    actor: z
      .string()
      .min(1)
      .max(AUDIT_FILTER_MAX)
      .optional()
      .describe("Only records of this actor: an admin user id, 'admin-token' or a tenant id"),
    tenant: z.string().min(1).max(AUDIT_FILTER_MAX).optional().describe('Only records whose target is this tenant'),
    action: z.string().min(1).max(AUDIT_FILTER_MAX).optional().describe('Only this action (an operationId, e.g. updateTenant)'),
    from: z.string().datetime({ offset: true }).optional().describe('Only records at or after this time (ISO 8601)'),
    to: z.string().datetime({ offset: true }).optional().describe('Only records before this time (ISO 8601)'),
    limit: z
      .number()
      .int()
      .min(1)
      .max(AUDIT_LOG_LIMIT_MAX)
      .default(AUDIT_LOG_LIMIT_DEFAULT)
      .describe(`Page size (default ${AUDIT_LOG_LIMIT_DEFAULT}, max ${AUDIT_LOG_LIMIT_MAX})`),
    cursor: z
      .string()
      .max(CURSOR_MAX)
      .optional()
      .describe('Continue after the last record of a previous answer (its pagination.nextCursor)'),
  })
  .passthrough();

/** The event streams of executions and session logs: how often to poll and to send a heartbeat. */
export const StreamQuery = z
  .object({
    interval: z.number().int().min(100).max(60_000).default(1000).describe('Polling interval in ms (default 1000).'),
    heartbeat: z.number().int().min(100).max(300_000).default(15_000).describe('Heartbeat interval in ms (default 15000).'),
  })
  .passthrough();

/** DELETE /api/webhooks: by id or by URL. */
export const WebhookDeleteQuery = z
  .object({ id: z.string().max(20).optional(), url: z.string().max(WEBHOOK_URL_MAX).optional() })
  .passthrough();

/** POST /api/webhooks/:id/deliveries/:deliveryId/replay (the service reports malformed ids as not found). */
export const WebhookDeliveryParams = IdParams.extend({ deliveryId: z.string() }).passthrough();

/** GET /api/webhooks/:id/deliveries. */
export const WebhookDeliveriesQuery = z
  .object({
    limit: z.number().int().min(1).max(WEBHOOK_DELIVERIES_LIMIT_MAX).default(WEBHOOK_DELIVERIES_LIMIT_DEFAULT),
  })
  .passthrough();

/** A tenant's data export (extension, issue 40): GET /api/exports/:exportId[/download]. */
export const ExportParams = z.object({ exportId: z.string().min(1).max(64) }).passthrough();
/** GET /admin/tenants/:tenantId/exports/:exportId[/download]. */
export const TenantExportParams = TenantParams.extend({ exportId: z.string().min(1).max(64) }).passthrough();
