/** Web console sessions (issue 38): a tenant signs in once with an API key; the gateway keeps the token in a cookie. */
import { badRequest, forbidden, unauthorized } from '@imagegen/platform';
import { randomId, randomToken, sha256Hex } from '../crypto.js';
import { SESSION_TTL_MS } from '../policy.js';
import * as apiKeys from '../repositories/api-keys.js';
import * as consoleSessions from '../repositories/console-sessions.js';
import type { HandlerContext, TenancyHandlers } from './context.js';

const SESSION_ENDED = 'Console session expired or ended: sign in again';
export const SIGNED_KEY_IN_CONSOLE = 'This API key requires signed requests, which the web console cannot make: use another key';

export function consoleSessionHandlers(
  c: HandlerContext,
): Pick<TenancyHandlers, 'createConsoleSession' | 'authenticateConsoleSession' | 'endConsoleSession'> {
  const { sql } = c;
  return {
    async createConsoleSession(req) {
      const key = /^[0-9a-f]{64}$/.test(req.keyHash) ? await apiKeys.authenticateKey(sql, req.keyHash) : undefined;
      if (!key) throw unauthorized();
      if (!key.tenantActive) throw forbidden('Tenant account is inactive');
      if (key.signatureRequired) throw badRequest(SIGNED_KEY_IN_CONSOLE);
      const token = randomToken('cons_');
      const expiresAt = new Date(Date.now() + SESSION_TTL_MS);
      await consoleSessions.insertConsoleSession(sql, {
        sessionId: randomId('csn_'),
        tokenHash: sha256Hex(token),
        tenantId: key.tenantId,
        keyId: key.keyId,
        expiresAt,
        ip: req.ip || undefined,
        userAgent: req.userAgent || undefined,
      });
      return { token, expiresAt: expiresAt.toISOString(), tenantId: key.tenantId };
    },

    async authenticateConsoleSession(req) {
      const s = await consoleSessions.findLiveConsoleSession(sql, req.tokenHash);
      if (!s) throw unauthorized(SESSION_ENDED);
      return { keyHash: s.keyHash, tenantId: s.tenantId, expiresAt: s.expiresAt.toISOString() };
    },

    async endConsoleSession(req) {
      return { ended: await consoleSessions.endConsoleSession(sql, req.tokenHash) };
    },
  };
}
