import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { parseDuration } from '../src/env.js';

describe('durations with their unit (OBJECT_DELETE_GRACE)', () => {
  it('reads 0 and a number with its unit', () => {
    expect(parseDuration('0')).toBe(0);
    expect(parseDuration('7d')).toBe(7 * 86_400_000);
    expect(parseDuration('36h')).toBe(36 * 3_600_000);
    expect(parseDuration(' 30m ')).toBe(1_800_000);
    expect(parseDuration('90s')).toBe(90_000);
    expect(parseDuration('250ms')).toBe(250);
    expect(parseDuration('1.5d')).toBe(129_600_000);
    for (const v of ['7', '-1d', '7 days', 'd', '7w', '']) expect(parseDuration(v), v).toBeUndefined();
  });

  it('the setting defaults to 7 days and refuses a value without a unit, naming it', () => {
    expect(loadConfig({}).objectDeleteGraceMs).toBe(7 * 86_400_000);
    expect(loadConfig({ OBJECT_DELETE_GRACE: '' }).objectDeleteGraceMs).toBe(7 * 86_400_000);
    expect(loadConfig({ OBJECT_DELETE_GRACE: '0' }).objectDeleteGraceMs).toBe(0);
    expect(loadConfig({ OBJECT_DELETE_GRACE: '30d' }).objectDeleteGraceMs).toBe(30 * 86_400_000);
    expect(() => loadConfig({ OBJECT_DELETE_GRACE: '7' })).toThrow(ConfigError);
    expect(() => loadConfig({ OBJECT_DELETE_GRACE: '7' })).toThrow(/OBJECT_DELETE_GRACE.*duration such as 7d.*\(got "7"\)/);
  });
});
