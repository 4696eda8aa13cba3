/**
 * The service's own checks of its requests (defence in depth: the gateway validates first). Limits and lists
 * come from @imagegen/api-schemas/vocab; the error texts are the service's. Each check adds to `details`.
 */
import {
  ADMIN_ROLES,
  API_KEY_TYPES,
  DISPLAY_NAME_MAX,
  EMAIL_MAX,
  KEY_NAME_MAX,
  MODEL_IDS,
  PASSWORD_MAX,
  PASSWORD_MIN,
  PROVIDER_KEY_MAX,
  PROVIDER_POOL_KEYS_MAX,
  PROVIDERS,
  type Provider,
  TENANT_ID_MAX,
} from '@imagegen/api-schemas/vocab';
import type { ProviderPoolUpdate } from '@imagegen/contracts/tenancy/v1/tenancy';
import type { AdminRole, KeyType } from '../domain.js';

/** Lowercase letters, digits, hyphens or underscores, starting with a letter or digit. */
export const TENANT_ID = new RegExp(`^[a-z0-9][a-z0-9_-]{0,${TENANT_ID_MAX - 1}}$`);
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** Whether `value` is one of `list` (narrowing it to the list's type). */
export function isOneOf<T extends string>(list: readonly T[], value: string): value is T {
  return (list as readonly string[]).includes(value);
}

/** `value` when it is one of `list`; otherwise undefined, after adding `message` to details. */
export function oneOf<T extends string>(details: string[], list: readonly T[], value: string, message: string): T | undefined {
  if (isOneOf(list, value)) return value;
  details.push(message);
  return undefined;
}

export function isEmail(email: string): boolean {
  return EMAIL.test(email) && email.length <= EMAIL_MAX;
}

export function checkModels(details: string[], modelId: string | undefined, allowed: string[] | undefined) {
  if (allowed) {
    if (allowed.length === 0) details.push('allowed_models must contain at least one model');
    for (const m of allowed) {
      if (!isOneOf(MODEL_IDS, m)) details.push(`allowed_models contains an unknown model: ${m}`);
    }
  }
  if (modelId !== undefined && !isOneOf(MODEL_IDS, modelId)) {
    details.push(`model_id must be one of: ${MODEL_IDS.join(', ')}`);
  }
}

/** A checked provider pool update: the new keys (trimmed), or remove (also when no keys are left). */
export interface PoolUpdate {
  provider: Provider;
  keys: string[];
  remove: boolean;
}

/** Validates provider pool updates; returns the valid ones normalized (trimmed keys). */
export function checkPools(details: string[], pools: ProviderPoolUpdate[]): PoolUpdate[] {
  const seen = new Set<string>();
  const out: PoolUpdate[] = [];
  for (const p of pools) {
    if (!isOneOf(PROVIDERS, p.provider)) {
      details.push(`provider_credentials.${p.provider} is not a known provider (${PROVIDERS.join(', ')})`);
      continue;
    }
    if (seen.has(p.provider)) {
      details.push(`provider_credentials.${p.provider} is given twice`);
      continue;
    }
    seen.add(p.provider);
    const keys = p.remove ? [] : p.keys.map((k) => k.trim());
    if (keys.some((k) => k.length === 0)) details.push(`provider_credentials.${p.provider} keys cannot be empty`);
    if (keys.some((k) => k.length > PROVIDER_KEY_MAX)) {
      details.push(`provider_credentials.${p.provider} keys must be at most ${PROVIDER_KEY_MAX} characters`);
    }
    if (keys.length > PROVIDER_POOL_KEYS_MAX) {
      details.push(`provider_credentials.${p.provider} must have at most ${PROVIDER_POOL_KEYS_MAX} keys`);
    }
    if (new Set(keys).size !== keys.length) details.push(`provider_credentials.${p.provider} contains duplicate keys`);
    out.push({ provider: p.provider, keys, remove: p.remove || keys.length === 0 });
  }
  return out;
}

/** Checks a key's name and type; returns the type when it is a known one. */
export function checkKeySpec(details: string[], name: string, type: string, prefix = ''): KeyType | undefined {
  const n = (name ?? '').trim();
  if (n.length === 0) details.push(`${prefix}key_name is required`);
  else if (n.length > KEY_NAME_MAX) details.push(`${prefix}key_name must be at most ${KEY_NAME_MAX} characters`);
  return oneOf(details, API_KEY_TYPES, type, `${prefix}type must be one of: ${API_KEY_TYPES.join(', ')}`);
}

/** Checks an admin role; returns it when it is a known one. */
export function checkRole(details: string[], role: string): AdminRole | undefined {
  return oneOf(details, ADMIN_ROLES, role, `role must be one of: ${ADMIN_ROLES.join(', ')}`);
}

export function checkPassword(details: string[], password: string) {
  if (typeof password !== 'string' || password.length === 0) details.push('password is required');
  else if (password.length < PASSWORD_MIN) details.push(`password must be at least ${PASSWORD_MIN} characters`);
  else if (password.length > PASSWORD_MAX) details.push(`password must be at most ${PASSWORD_MAX} characters`);
}

export function checkDisplayName(details: string[], name: string) {
  const n = (name ?? '').trim();
  if (n.length === 0) details.push('display_name is required');
  else if (n.length > DISPLAY_NAME_MAX) details.push(`display_name must be at most ${DISPLAY_NAME_MAX} characters`);
}
