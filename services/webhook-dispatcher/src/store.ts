import type { Delivery, DeliveryAttempt, Webhook } from '@imagegen/contracts/webhooks/v1/webhooks';
import type { Sql, TransactionSql } from '@imagegen/platform';

type Db = Sql | TransactionSql;
type Row = Record<string, any>;

const iso = (v: unknown): string | undefined => (v instanceof Date ? v.toISOString() : v == null ? undefined : String(v));
const num = (v: unknown): number | undefined => (v == null ? undefined : Number(v));

export interface EndpointRow {
  id: number;
  tenantId: string;
  url: string;
  secret: string;
  events: string[];
  enabled: boolean;
}

export function toWebhook(r: Row): Webhook {
  return {
    id: Number(r.id),
    url: r.url,
    description: r.description ?? undefined,
    events: r.events,
    enabled: r.enabled,
    disabledReason: r.disabled_reason ?? undefined,
    consecutiveFailures: Number(r.consecutive_failures),
    lastDeliveryStatus: r.last_delivery_status ?? undefined,
    lastResponseStatus: num(r.last_response_status),
    lastDeliveryAt: iso(r.last_delivery_at),
    secretHint: r.secret_hint,
    createdAt: iso(r.created_at) as string,
    updatedAt: iso(r.updated_at) as string,
  };
}

function toAttempt(r: Row): DeliveryAttempt {
  return {
    attempt: Number(r.attempt),
    responseStatus: num(r.response_status),
    error: r.error ?? undefined,
    durationMs: Number(r.duration_ms),
    attemptedAt: iso(r.attempted_at) as string,
  };
}

/** The webhook-id of a delivery: its event's id (a delivery made before migration 002 has none: its own id). */
const eventIdOf = (r: Row): string => (r.event_id ?? r.id) as string;

export function toDelivery(r: Row, attempts: DeliveryAttempt[] = []): Delivery {
  return {
    id: r.id,
    eventId: eventIdOf(r),
    replayOf: r.replay_of ?? undefined,
    webhookId: Number(r.endpoint_id),
    event: r.event,
    status: r.status,
    attemptCount: Number(r.attempt_count),
    nextAttemptAt: r.status === 'pending' ? iso(r.next_attempt_at) : undefined,
    lastResponseStatus: num(r.last_response_status),
    lastError: r.last_error ?? undefined,
    payload: r.payload,
    createdAt: iso(r.created_at) as string,
    completedAt: iso(r.completed_at),
    attempts,
  };
}

export async function countEndpoints(db: Db, tenantId: string): Promise<number> {
  const [r] = await db`SELECT count(*)::int AS n FROM endpoints WHERE tenant_id = ${tenantId}`;
  return r.n as number;
}

export async function insertEndpoint(
  db: Db,
  e: { tenantId: string; url: string; description?: string; events: string[]; secret: string; secretHint: string },
): Promise<Row> {
  const [r] = await db`
    INSERT INTO endpoints (tenant_id, url, description, events, secret, secret_hint)
    VALUES (${e.tenantId}, ${e.url}, ${e.description ?? null}, ${e.events}, ${e.secret}, ${e.secretHint})
    RETURNING *`;
  return r;
}

export async function listEndpoints(db: Db, tenantId: string): Promise<Row[]> {
  return db`SELECT * FROM endpoints WHERE tenant_id = ${tenantId} ORDER BY id`;
}

export async function getEndpoint(db: Db, tenantId: string, id: number): Promise<Row | undefined> {
  const [r] = await db`SELECT * FROM endpoints WHERE tenant_id = ${tenantId} AND id = ${id}`;
  return r;
}

export async function deleteEndpoint(db: Db, tenantId: string, id: number): Promise<boolean> {
  const r = await db`DELETE FROM endpoints WHERE tenant_id = ${tenantId} AND id = ${id}`;
  return r.count > 0;
}

/** Enabling clears the failure streak and makes pending deliveries due at once. */
export async function setEnabled(tx: TransactionSql, tenantId: string, id: number, enabled: boolean): Promise<Row | undefined> {
  const [r] = enabled
    ? await tx`
        UPDATE endpoints SET enabled = true, disabled_reason = NULL, consecutive_failures = 0, updated_at = now()
        WHERE tenant_id = ${tenantId} AND id = ${id} RETURNING *`
    : await tx`
        UPDATE endpoints SET enabled = false, disabled_reason = 'user', updated_at = now()
        WHERE tenant_id = ${tenantId} AND id = ${id} RETURNING *`;
  if (r && enabled) {
    await tx`
      UPDATE deliveries SET next_attempt_at = now(), locked_until = NULL
      WHERE tenant_id = ${tenantId} AND endpoint_id = ${id} AND status = 'pending'`;
  }
  return r;
}

export async function setEvents(db: Db, tenantId: string, id: number, events: string[]): Promise<Row | undefined> {
  const [r] = await db`
    UPDATE endpoints SET events = ${events}, updated_at = now()
    WHERE tenant_id = ${tenantId} AND id = ${id} RETURNING *`;
  return r;
}

export async function setDescription(db: Db, tenantId: string, id: number, description: string | null): Promise<Row | undefined> {
  const [r] = await db`
    UPDATE endpoints SET description = ${description}, updated_at = now()
    WHERE tenant_id = ${tenantId} AND id = ${id} RETURNING *`;
  return r;
}

/**
 * Queues a delivery. `sourceEventId` (a bus event) makes it once per endpoint and event; `eventId` is the
 * webhook-id header and the payload's id (the bus event's id, or the delivery's own for a test delivery).
 */
export async function insertDelivery(
  db: Db,
  d: {
    id: string;
    endpointId: number;
    tenantId: string;
    event: string;
    eventId: string;
    sourceEventId?: string;
    replayOf?: string;
    payload: string;
  },
): Promise<Row | undefined> {
  const [r] = await db`
    INSERT INTO deliveries (id, endpoint_id, tenant_id, event, event_id, source_event_id, replay_of, payload, next_attempt_at)
    VALUES (${d.id}, ${d.endpointId}, ${d.tenantId}, ${d.event}, ${d.eventId}, ${d.sourceEventId ?? null},
      ${d.replayOf ?? null}, ${d.payload}, now())
    ON CONFLICT (endpoint_id, source_event_id) DO NOTHING
    RETURNING *`;
  return r;
}

/** One delivery of an endpoint of the tenant (undefined for a malformed id, another endpoint's or tenant's). */
export async function getDelivery(db: Db, tenantId: string, endpointId: number, id: string): Promise<Row | undefined> {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id)) return undefined;
  const [r] = await db`SELECT * FROM deliveries WHERE tenant_id = ${tenantId} AND endpoint_id = ${endpointId} AND id = ${id}`;
  return r;
}

export async function listDeliveries(db: Db, tenantId: string, endpointId: number, limit: number): Promise<Delivery[]> {
  const rows = await db`
    SELECT * FROM deliveries WHERE tenant_id = ${tenantId} AND endpoint_id = ${endpointId}
    ORDER BY created_at DESC, id LIMIT ${limit}`;
  if (rows.length === 0) return [];
  const attempts = await db`
    SELECT * FROM delivery_attempts WHERE delivery_id = ANY(${rows.map((r) => r.id)}::uuid[]) ORDER BY attempt`;
  const byDelivery = new Map<string, DeliveryAttempt[]>();
  for (const a of attempts) {
    const list = byDelivery.get(a.delivery_id) ?? [];
    list.push(toAttempt(a));
    byDelivery.set(a.delivery_id, list);
  }
  return rows.map((r) => toDelivery(r, byDelivery.get(r.id) ?? []));
}

/**
 * Endpoints of a tenant subscribed to an event (enabled or not: a disabled endpoint gets it on re-enable). With
 * `occurredAt`, only the endpoints that existed when it occurred (give or take the clocks' skew): an endpoint
 * created while the consumer catches up (after a deploy or an outage) is not sent the events before it.
 */
export async function subscribedEndpoints(db: Db, tenantId: string, event: string, occurredAt?: string): Promise<{ id: number }[]> {
  const at = occurredAt && !Number.isNaN(Date.parse(occurredAt)) ? new Date(occurredAt) : null;
  const rows = await db`
    SELECT id FROM endpoints
    WHERE tenant_id = ${tenantId} AND ${event} = ANY(events)
      AND (${at}::timestamptz IS NULL OR created_at <= ${at}::timestamptz + interval '5 seconds')
    ORDER BY id`;
  return rows.map((r) => ({ id: Number(r.id) }));
}

export interface ClaimedDelivery {
  id: string;
  /** The webhook-id header. */
  eventId: string;
  endpointId: number;
  tenantId: string;
  event: string;
  payload: string;
  attemptCount: number;
}

/**
 * Leases due deliveries of enabled endpoints: at most one per endpoint, and none for an endpoint that
 * already has a delivery under a live lease (in flight here or on another replica), so deliveries to
 * one endpoint go one at a time across replicas, and a lease only has to cover one attempt (a queue of
 * deliveries leased together would outlive its lease behind a slow endpoint and be sent twice).
 * The endpoint rows are locked (SKIP LOCKED) before the lease check, which runs in a statement of its
 * own (a fresh snapshot): a replica that got the lock after another one committed sees that lease.
 * A crashed replica's lease simply runs out.
 */
export async function claimDue(sql: Sql, batch: number, leaseMs: number): Promise<ClaimedDelivery[]> {
  const rows = await sql.begin(async (tx) => {
    const candidates = await tx`
      SELECT d.endpoint_id, min(d.next_attempt_at) AS due
      FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id
      WHERE d.status = 'pending' AND d.next_attempt_at <= now() AND e.enabled
      GROUP BY d.endpoint_id
      HAVING bool_and(d.locked_until IS NULL OR d.locked_until < now())
      ORDER BY due, d.endpoint_id
      LIMIT ${batch}`;
    if (candidates.length === 0) return [];
    const locked = await tx`
      SELECT id FROM endpoints WHERE id = ANY(${candidates.map((c) => String(c.endpoint_id))}::bigint[]) AND enabled
      ORDER BY id FOR UPDATE SKIP LOCKED`;
    if (locked.length === 0) return [];
    return tx`
      UPDATE deliveries d SET locked_until = now() + ${`${leaseMs} milliseconds`}::interval
      FROM (
        SELECT DISTINCT ON (d2.endpoint_id) d2.id FROM deliveries d2
        WHERE d2.endpoint_id = ANY(${locked.map((r) => String(r.id))}::bigint[])
          AND d2.status = 'pending' AND d2.next_attempt_at <= now()
          AND NOT EXISTS (
            SELECT 1 FROM deliveries l
            WHERE l.endpoint_id = d2.endpoint_id AND l.status = 'pending' AND l.locked_until >= now())
        ORDER BY d2.endpoint_id, d2.next_attempt_at, d2.created_at
      ) c
      WHERE d.id = c.id
      RETURNING d.id, d.event_id, d.endpoint_id, d.tenant_id, d.event, d.payload, d.attempt_count, d.created_at`;
  });
  return (rows as Row[]).map(claimedOf).sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime());
}

const claimedOf = (r: Row): ClaimedDelivery & { createdAt: Date } => ({
  id: r.id as string,
  eventId: eventIdOf(r),
  endpointId: Number(r.endpoint_id),
  tenantId: r.tenant_id as string,
  event: r.event as string,
  payload: r.payload as string,
  attemptCount: Number(r.attempt_count),
  createdAt: r.created_at as Date,
});

/**
 * A successful attempt in one statement (one round trip, the delivery path's common case): the endpoint's row
 * locked, the attempt stored, the delivery succeeded, the endpoint's failure count reset, and, when `leaseNext`
 * and the endpoint is still enabled, its next due delivery leased (as leaseNextOfEndpoint). `found` is false when
 * the endpoint was deleted meanwhile (nothing is written then).
 */
export async function recordSuccess(
  db: Db,
  d: { id: string; endpointId: number; tenantId: string },
  r: { attempt: number; status?: number; durationMs: number },
  opts: { leaseMs: number; leaseNext: boolean },
): Promise<{ found: boolean; next?: ClaimedDelivery; endpoint?: EndpointRow }> {
  const [row] = await db`
    WITH ep AS (
      SELECT id, tenant_id, url, secret, events, enabled FROM endpoints WHERE id = ${d.endpointId} AND tenant_id = ${d.tenantId} FOR UPDATE
    ), attempt AS (
      INSERT INTO delivery_attempts (delivery_id, attempt, response_status, error, duration_ms)
      SELECT ${d.id}, ${r.attempt}, ${r.status ?? null}, NULL, ${r.durationMs} FROM ep
    ), delivered AS (
      UPDATE deliveries SET status = 'succeeded', attempt_count = ${r.attempt}, completed_at = now(),
        next_attempt_at = NULL, locked_until = NULL, last_response_status = ${r.status ?? null}, last_error = NULL
      WHERE id = ${d.id} AND EXISTS (SELECT 1 FROM ep)
    ), endpoint AS (
      UPDATE endpoints SET consecutive_failures = 0, last_delivery_status = 'success',
        last_response_status = ${r.status ?? null}, last_delivery_at = now(), updated_at = now()
      WHERE id IN (SELECT id FROM ep)
    ), next AS (
      UPDATE deliveries n SET locked_until = now() + ${`${opts.leaseMs} milliseconds`}::interval
      FROM (
        SELECT id FROM deliveries
        WHERE endpoint_id = ${d.endpointId} AND status = 'pending' AND next_attempt_at <= now() AND id <> ${d.id}
          AND ${opts.leaseNext} AND EXISTS (SELECT 1 FROM ep WHERE enabled)
        ORDER BY next_attempt_at, created_at LIMIT 1
      ) c
      WHERE n.id = c.id
      RETURNING n.id, n.event_id, n.endpoint_id, n.tenant_id, n.event, n.payload, n.attempt_count, n.created_at
    )
    SELECT EXISTS (SELECT 1 FROM ep) AS found, next.*, ep.url AS ep_url, ep.secret AS ep_secret, ep.events AS ep_events
    FROM (SELECT 1) one LEFT JOIN next ON true LEFT JOIN ep ON true`;
  if (!row?.found) return { found: false };
  // The endpoint as locked here: the next delivery needs no read of its own (it is enabled, or no next was leased).
  const endpoint: EndpointRow = {
    id: d.endpointId,
    tenantId: d.tenantId,
    url: row.ep_url,
    secret: row.ep_secret,
    events: row.ep_events,
    enabled: true,
  };
  return { found: true, next: row.id ? claimedOf(row) : undefined, endpoint: row.id ? endpoint : undefined };
}

export async function loadEndpointForDelivery(db: Db, tenantId: string, id: number): Promise<EndpointRow | undefined> {
  const [r] = await db`SELECT id, tenant_id, url, secret, events, enabled FROM endpoints WHERE tenant_id = ${tenantId} AND id = ${id}`;
  return r ? { id: Number(r.id), tenantId: r.tenant_id, url: r.url, secret: r.secret, events: r.events, enabled: r.enabled } : undefined;
}

export async function releaseLease(db: Db, deliveryId: string): Promise<void> {
  await db`UPDATE deliveries SET locked_until = NULL WHERE id = ${deliveryId}`;
}

export async function nextDueAt(sql: Sql): Promise<Date | undefined> {
  // Per endpoint: its earliest due delivery, or the end of the live lease of the one in flight (claimDue
  // takes nothing from an endpoint with a delivery in flight).
  const [r] = await sql`
    SELECT min(at) AS at FROM (
      SELECT CASE WHEN max(d.locked_until) >= now() THEN max(d.locked_until) ELSE min(d.next_attempt_at) END AS at
      FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id
      WHERE d.status = 'pending' AND e.enabled
      GROUP BY d.endpoint_id
    ) x`;
  return r?.at ?? undefined;
}

/** Retention: finished deliveries (and their attempts) after 30 days; the consumers' dedupe rows after 14 days. */
export async function pruneOld(sql: Sql, consumers: string[]): Promise<void> {
  await sql`DELETE FROM deliveries WHERE status <> 'pending' AND completed_at < now() - interval '30 days'`;
  await sql`DELETE FROM processed_events WHERE consumer = ANY(${consumers}) AND processed_at < now() - interval '14 days'`;
}
