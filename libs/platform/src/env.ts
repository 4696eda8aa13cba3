/**
 * A duration in milliseconds from the environment (fault tests shorten timers of the reapers with these),
 * `dflt` when unset or not a positive number. Read once, when a module loads.
 */
export function durationFromEnv(name: string, dflt: number): number {
  const v = process.env[name];
  const n = Number(v);
  return v !== undefined && v !== '' && Number.isFinite(n) && n > 0 ? n : dflt;
}
