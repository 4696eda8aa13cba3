/**
 * The one polling helper of the test suite (issue 36): wait for a condition instead of sleeping for a while.
 *
 * `waitFor(check)` calls `check` at once and then every `interval` ms until it returns a truthy value without
 * throwing, and resolves with that value. A check that throws (an `expect` inside it, a request that fails
 * while a service starts) counts as "not yet". When `timeout` ms have passed it fails with an error naming
 * what it waited for (`message`, else the check's own source text) and the last error or value it saw.
 *
 *   const row = await waitFor(async () => (await sql`SELECT ...`)[0], { message: 'the stored image row' });
 *   await waitFor(() => received.length === 3);
 *   await waitFor(() => { expect(state).toEqual(wanted); return true; });
 *
 * Nothing here asserts speed: the timeout only bounds a wait that would otherwise hang.
 */
export interface WaitOptions {
  /** Give up after this many ms (default 10 s). */
  timeout?: number;
  /** Pause between two checks, in ms (default 25). */
  interval?: number;
  /** What is waited for, for the error on timeout (default: the check's source text). */
  message?: string;
}

type Truthy<T> = Exclude<T, undefined | null | false | 0 | ''>;

export async function waitFor<T>(check: () => T | Promise<T>, opts: WaitOptions = {}): Promise<Truthy<T>> {
  const timeout = opts.timeout ?? 10_000;
  const interval = opts.interval ?? 25;
  const deadline = Date.now() + timeout;
  let lastError: unknown;
  let lastValue: unknown;
  let tries = 0;
  for (;;) {
    tries++;
    try {
      const value = await check();
      if (value) return value as Truthy<T>;
      lastValue = value;
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() >= deadline) break;
    await new Promise((r) => setTimeout(r, Math.max(0, Math.min(interval, deadline - Date.now()))));
  }
  const what = opts.message ?? describeCheck(check);
  const last = lastError !== undefined ? `last error: ${errorText(lastError)}` : `last value: ${valueText(lastValue)}`;
  throw new Error(`timed out after ${timeout} ms (${tries} checks) waiting for ${what}; ${last}`, { cause: lastError });
}

function describeCheck(check: () => unknown): string {
  const src = check.toString().replace(/\s+/g, ' ').trim();
  return src.length > 300 ? `${src.slice(0, 300)}…` : src;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function valueText(v: unknown): string {
  try {
    const s = JSON.stringify(v);
    return s === undefined ? String(v) : s.length > 300 ? `${s.slice(0, 300)}…` : s;
  } catch {
    return String(v);
  }
}
