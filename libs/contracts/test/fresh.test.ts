import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, expect, test } from 'vitest';

const repo = new URL('../../../', import.meta.url).pathname;
const out = mkdtempSync(join(tmpdir(), 'contracts-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

function listFiles(dir: string): string[] {
  const files: string[] = [];
  const walk = (d: string) => {
    for (const f of readdirSync(d)) {
      const p = join(d, f);
      if (statSync(p).isDirectory()) walk(p);
      else files.push(relative(dir, p));
    }
  };
  walk(dir);
  return files.sort();
}

test('generated contracts match proto/ (run `pnpm proto` when this fails)', () => {
  execFileSync(join(repo, 'node_modules/.bin/buf'), ['generate', '--output', out], { cwd: repo });
  const fresh = join(out, 'libs/contracts/src/gen');
  const committed = join(repo, 'libs/contracts/src/gen');
  expect(listFiles(committed)).toEqual(listFiles(fresh));
  for (const f of listFiles(fresh)) {
    expect(readFileSync(join(committed, f), 'utf8'), f).toBe(readFileSync(join(fresh, f), 'utf8'));
  }
});
