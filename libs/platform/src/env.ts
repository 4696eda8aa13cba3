/**
 * A duration in milliseconds from the environment (fault tests shorten timers of the reapers with these),
 * `dflt` when unset or not a positive number. Read once, when a module loads.
 */
export function durationFromEnv(name: string, dflt: number): number {
  const v = process.env[name];
  const n = Number(v);
  return v !== undefined && v !== '' && Number.isFinite(n) && n > 0 ? n : dflt;
}

const DURATION_UNITS_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A duration written with its unit (`500ms`, `90s`, `30m`, `12h`, `7d`, or `0`) in milliseconds; undefined when
 * it has no unit or is otherwise unreadable (a setting refuses it rather than guessing: a grace period read as
 * seconds instead of days would lose data).
 */
export function parseDuration(text: string): number | undefined {
  const v = text.trim();
  if (v === '0') return 0;
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(v);
  return m ? Math.round(Number(m[1]) * DURATION_UNITS_MS[m[2]]) : undefined;
}
