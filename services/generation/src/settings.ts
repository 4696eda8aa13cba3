import { UPLOAD_MAX_BYTES, UPLOAD_MAX_PIXELS } from '@imagegen/api-schemas/vocab';
import type { Config } from '@imagegen/platform';

/**
 * Generation tunables: the platform config's `generation` group (Config.generation, from the environment
 * names below, validated by loadConfig), the fixed limits of SPEC 8, then per-call overrides (service tests
 * pass small breaker values).
 */
export interface GenerationSettings {
  /** PROVIDER_BREAKER_THRESHOLD: consecutive failures that open a provider's circuit (default 5). */
  breakerFailureThreshold: number;
  /** PROVIDER_BREAKER_RESET_MS: open -> half_open after this long (default 30000). */
  breakerResetTimeoutMs: number;
  /** PROVA_TIMEOUT_MS: provA request timeout (default 120000). */
  provATimeoutMs: number;
  /** PROVB_TIMEOUT_MS: provB request timeout (default 240000, SPEC 8). */
  provBTimeoutMs: number;
  /** UPLOAD_FETCH_TIMEOUT_MS: upload-for-editing fetch budget (default 30000). */
  uploadTimeoutMs: number;
  /** Upload size limit (SPEC 8: 20 MB). */
  uploadMaxBytes: number;
  /** Upload pixel limit (SPEC 8: 4,194,304). */
  uploadMaxPixels: number;
  /** Running executions without progress for this long are marked failed (default 15 min). */
  staleExecutionMs: number;
}

export const DEFAULT_SETTINGS: GenerationSettings = {
  breakerFailureThreshold: 5,
  breakerResetTimeoutMs: 30_000,
  provATimeoutMs: 120_000,
  provBTimeoutMs: 240_000,
  uploadTimeoutMs: 30_000,
  uploadMaxBytes: UPLOAD_MAX_BYTES,
  uploadMaxPixels: UPLOAD_MAX_PIXELS,
  staleExecutionMs: 15 * 60_000,
};

export function loadSettings(config: Config, overrides: Partial<GenerationSettings> = {}): GenerationSettings {
  return { ...DEFAULT_SETTINGS, ...config.generation, ...overrides };
}
