import { afterEach, describe, expect, it } from 'vitest';
import { durationSettingFromEnv } from '../src/env.js';

const NAME = 'IMAGEGEN_TEST_DURATION';
afterEach(() => {
  delete process.env[NAME];
});

describe('durationSettingFromEnv', () => {
  it('reads a duration with its unit, 0, or the default when unset', () => {
    const read = (v: string | undefined) => {
      if (v === undefined) delete process.env[NAME];
      else process.env[NAME] = v;
      return durationSettingFromEnv(NAME, 42);
    };
    expect(read(undefined)).toBe(42);
    expect(read('')).toBe(42);
    expect(read('0')).toBe(0);
    expect(read('7d')).toBe(7 * 86_400_000);
    expect(read('36h')).toBe(36 * 3_600_000);
    expect(read('30m')).toBe(1_800_000);
    expect(read('90s')).toBe(90_000);
    expect(read('250ms')).toBe(250);
    expect(read('1.5d')).toBe(129_600_000);
  });

  it('refuses a value without a unit or unreadable, naming the setting', () => {
    for (const v of ['7', '-1d', '7 days', 'd', '7w']) {
      process.env[NAME] = v;
      expect(() => durationSettingFromEnv(NAME, 1)).toThrow(`${NAME} must be a duration such as 7d`);
    }
  });
});
