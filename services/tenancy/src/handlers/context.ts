import { TenantChanged } from '@imagegen/contracts/events/v1/events';
import type { TenancyServiceService } from '@imagegen/contracts/tenancy/v1/tenancy';
import { AppError, conflict, type Handlers, notFound, type Sql, subjectFor, type TransactionSql, writeOutbox } from '@imagegen/platform';
import { randomId, randomToken, sha256Hex } from '../crypto.js';
import { SESSION_TTL_MS } from '../policy.js';
import * as adminSessions from '../repositories/admin-sessions.js';
import type { Db } from '../repositories/db.js';
import type { UsageBatcher } from '../usage-batcher.js';

export type TenancyHandlers = Handlers<typeof TenancyServiceService>;

export interface TenancyDeps {
  sql: Sql;
  credentialsKey: Buffer;
  eventsPrefix: string;
  usage: UsageBatcher;
  /** A scrypt hash of a random password, verified when the email is unknown (constant time). */
  dummyPasswordHash: string;
  /** How long a rotated request-signing secret is still accepted when the rotation names no grace period. */
  signingSecretGraceMs: number;
}

/** What every area's handlers get: the dependencies and the tenant-changed event writer. */
export interface HandlerContext extends TenancyDeps {
  /** Writes TenantChanged to the outbox, in the transaction of the change it reports. */
  tenantChanged(tx: TransactionSql, tenantId: string, reason: string): Promise<void>;
}

export function handlerContext(deps: TenancyDeps): HandlerContext {
  const subject = subjectFor(deps.eventsPrefix, 'tenancy.tenant_changed');
  return {
    ...deps,
    async tenantChanged(tx, tenantId, reason) {
      const data = TenantChanged.encode({ tenantId, reason, occurredAt: new Date().toISOString() }).finish();
      await writeOutbox(tx, { subject, data });
    },
  };
}

export const tenantNotFound = () => notFound('Tenant not found');
export const userNotFound = () => notFound('Admin user not found');
export const invitationNotFound = () => notFound('Invitation not found');
export const emailTaken = () => conflict('An admin user with this email already exists');
export const gone = (error: string) => new AppError(410, { error });

export function normalizeTenantId(id: string): string {
  return (id ?? '').trim().toLowerCase();
}

export function normalizeEmail(email: string): string {
  return (email ?? '').trim().toLowerCase();
}

/** Opens an admin session: the token is answered once, only its hash is stored. */
export async function createSession(db: Db, userId: string, ip?: string, userAgent?: string) {
  const token = randomToken('adms_');
  const expiresAt = new Date(Date.now() + SESSION_TTL_MS);
  await adminSessions.insertSession(db, { sessionId: randomId('ses_'), tokenHash: sha256Hex(token), userId, expiresAt, ip, userAgent });
  return { token, expiresAt: expiresAt.toISOString() };
}
