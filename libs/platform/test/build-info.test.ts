import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildInfo, readBuildInfo } from '../src/build-info.js';

const rootVersion = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')).version as string;
const dirs: string[] = [];
const folder = (pkg?: object) => {
  const dir = mkdtempSync(join(tmpdir(), 'imagegen-build-info-'));
  dirs.push(dir);
  if (pkg) writeFileSync(join(dir, 'package.json'), JSON.stringify(pkg));
  return dir;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('buildInfo: the version of the root package.json and the commit', () => {
  it("this process's: the root package.json's version, looked up once", () => {
    expect(buildInfo().version).toBe(rootVersion);
    expect(buildInfo()).toBe(buildInfo());
    expect(buildInfo()).toEqual(readBuildInfo());
    expect(Object.isFrozen(buildInfo())).toBe(true);
  });

  it('IMAGEGEN_COMMIT wins (trimmed); blank counts as unset', () => {
    const root = folder({ version: '3.4.5' });
    expect(readBuildInfo({ root, env: { IMAGEGEN_COMMIT: ' 0123abc \n' } })).toEqual({ version: '3.4.5', commit: '0123abc' });
    expect(readBuildInfo({ root, env: { IMAGEGEN_COMMIT: '  ' } })).toEqual({ version: '3.4.5', commit: 'unknown' });
  });

  it("without IMAGEGEN_COMMIT, the checkout's HEAD when a .git is there", () => {
    const root = folder({ version: '1.2.3' });
    const git = (...args: string[]) =>
      execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd: root, encoding: 'utf8' }).trim();
    git('init', '-q');
    git('commit', '-q', '--allow-empty', '-m', 'one');
    const head = git('rev-parse', 'HEAD');
    expect(head).toMatch(/^[0-9a-f]{40}$/);
    expect(readBuildInfo({ root, env: {} })).toEqual({ version: '1.2.3', commit: head });
  });

  it("'unknown' without .git (the image without IMAGEGEN_COMMIT), and without a readable version", () => {
    expect(readBuildInfo({ root: folder({ version: '1.2.3' }), env: {} })).toEqual({ version: '1.2.3', commit: 'unknown' });
    expect(readBuildInfo({ root: folder({ name: 'x' }), env: {} }).version).toBe('unknown');
    expect(readBuildInfo({ root: folder(), env: {} })).toEqual({ version: 'unknown', commit: 'unknown' });
  });
});
