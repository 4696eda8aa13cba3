import type { ModelId } from '@imagegen/platform';

export { MODEL_IDS, type ModelId } from '@imagegen/platform';
export const DEFAULT_MODEL: ModelId = 'provA-flash-lite-image';

export const PROVIDERS = ['provA', 'provB'] as const;
export type Provider = (typeof PROVIDERS)[number];
export const MAX_PROVIDER_KEYS = 5;

export const MAX_API_KEYS = 10;
export const MAX_KEY_NAME = 100;
export const DEFAULT_QUOTA_MB = 10240;
export const DEFAULT_RATE_LIMIT = 60;

export const ADMIN_ROLES = ['admin', 'super_admin'] as const;
export type AdminRole = (typeof ADMIN_ROLES)[number];

/** Consecutive failed sign-ins that lock an account; the lock lasts LOCKOUT_MS or until unlocked. */
export const MAX_FAILED_LOGINS = 5;
export const LOCKOUT_MS = 15 * 60_000;
/** Admin session lifetime (absolute). */
export const SESSION_TTL_MS = 12 * 3_600_000;
export const MIN_PASSWORD_LENGTH = 12;
export const MAX_PASSWORD_LENGTH = 256;
export const DEFAULT_INVITATION_DAYS = 7;
export const MAX_INVITATION_DAYS = 30;

export function providerOfModel(model: string): Provider {
  return model.startsWith('provB') ? 'provB' : 'provA';
}
