import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/**
 * One version for the product (issue 40): the root package.json's `version` is semver, and CHANGELOG.md (Keep a
 * Changelog) opens with [Unreleased], then that version as its newest released heading, older ones below it.
 */

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const version = JSON.parse(read('package.json')).version as unknown;
const changelog = read('CHANGELOG.md');

// semver.org's regular expression for a version (2.0.0).
const SEMVER =
  /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

/** Precedence of two release versions (no pre-release part): negative when a is older. */
const compare = (a: string, b: string) => {
  const [x, y] = [a, b].map((v) => v.split(/[-+]/)[0].split('.').map(Number));
  return x[0] - y[0] || x[1] - y[1] || x[2] - y[2];
};

describe('the product version', () => {
  it('the root package.json has a semver version', () => {
    expect(typeof version).toBe('string');
    expect(version).toMatch(SEMVER);
  });

  it('CHANGELOG.md: [Unreleased] first, then the version as the newest release, dated, older ones in order', () => {
    const headings = [...changelog.matchAll(/^## \[([^\]]+)\](.*)$/gm)].map((m) => ({ name: m[1], rest: m[2] }));
    expect(headings[0]?.name).toBe('Unreleased');
    const released = headings.slice(1);
    expect(released[0]?.name, 'the newest released heading').toBe(version);
    for (const h of released) {
      expect(h.name, 'a released heading').toMatch(SEMVER);
      expect(h.rest, `${h.name}: " - YYYY-MM-DD"`).toMatch(/^ - \d{4}-\d{2}-\d{2}$/);
    }
    for (let i = 1; i < released.length; i++) {
      expect(compare(released[i - 1].name, released[i].name), `${released[i - 1].name} above ${released[i].name}`).toBeGreaterThan(0);
    }
  });
});
