/** Tenancy's own sign-in policy (not part of the API's vocabulary). */

/** Consecutive failed sign-ins that lock an account; the lock lasts LOCKOUT_MS or until unlocked. */
export const MAX_FAILED_LOGINS = 5;
export const LOCKOUT_MS = 15 * 60_000;
/** Admin session lifetime (absolute). */
export const SESSION_TTL_MS = 12 * 3_600_000;
