import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../distributed/harness.js';

/**
 * The previous release's code, taken from this repository's own history: the commit named in
 * upgrade/previous-version, extracted with `git archive` into a folder of its own and installed offline
 * from the pnpm store, as deploy/Dockerfile installs a release (production dependencies of the services,
 * tsx beside them). The folder is kept under the system's tmp, keyed by commit, and reused by later runs.
 */

export const PREVIOUS_VERSION_FILE = join(REPO_ROOT, 'upgrade', 'previous-version');

export interface PreviousVersion {
  commit: string;
  /** package.json's version at that commit. */
  version: string;
  /** The current tree's package.json version. */
  currentVersion: string;
  /** The installed tree (services/<name>/src/main.ts runs from here). */
  root: string;
  /** Time spent extracting and installing (0 when a previous run's folder was reused). */
  installMs: number;
  reused: boolean;
}

/** The commit upgrade/previous-version names (its first line that is neither blank nor a comment). */
export function previousCommit(): string {
  const line = readFileSync(PREVIOUS_VERSION_FILE, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l !== '' && !l.startsWith('#'));
  if (!line || !/^[0-9a-f]{40}$/.test(line)) {
    throw new Error(`${PREVIOUS_VERSION_FILE} must name one full commit hash (40 hex digits), found ${JSON.stringify(line)}`);
  }
  return line;
}

const git = (...args: string[]) => spawnSync('git', args, { cwd: REPO_ROOT, encoding: 'utf8' });

export function materialisePrevious(): PreviousVersion {
  const commit = previousCommit();
  if (git('cat-file', '-e', `${commit}^{commit}`).status !== 0) {
    throw new Error(
      `The previous version's commit ${commit} (named in upgrade/previous-version) is not in this clone's history. ` +
        'The rolling-upgrade test takes the previous release from git: clone with full history (git fetch --unshallow, ' +
        'or fetch-depth: 0 in CI), or correct upgrade/previous-version.',
    );
  }
  const version = JSON.parse(git('show', `${commit}:package.json`).stdout).version as string;
  const currentVersion = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).version as string;
  const root = join(tmpdir(), `imagegen-previous-${commit}`);
  const marker = join(root, '.imagegen-installed');
  if (existsSync(marker)) return { commit, version, currentVersion, root, installMs: 0, reused: true };

  const t0 = Date.now();
  const partial = `${root}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  try {
    execFileSync('sh', ['-c', `git -C "${REPO_ROOT}" archive "${commit}" | tar -x -C "${partial}"`], { stdio: 'pipe' });
    // deploy/Dockerfile's install: the services' production dependencies, the test and client packages left out.
    const install = spawnSync(
      'npx',
      [
        '-y',
        'pnpm@10',
        'install',
        // From the store (the current install put nearly everything there); a package only the previous
        // lockfile pins comes from the registry.
        '--prefer-offline',
        '--frozen-lockfile',
        '--prod',
        '--filter',
        '!@imagegen/e2e',
        '--filter',
        '!@imagegen/client',
      ],
      { cwd: partial, encoding: 'utf8', env: { ...process.env, CI: '1' }, timeout: 300_000 },
    );
    if (install.status !== 0) {
      throw new Error(
        `Installing the previous version (${commit}) failed: a package its lockfile pins is neither in the pnpm store nor ` +
          `reachable in the registry (run \`npx -y pnpm@10 install --frozen-lockfile --prod\` once in ${partial} with network access).\n` +
          `${install.stdout.slice(-2000)}\n${install.stderr.slice(-2000)}`,
      );
    }
    // tsx runs the TypeScript and is a root devDependency: the image installs the pinned one beside the production
    // install; here the current tree's tsx serves (it only transpiles).
    symlinkSync(join(REPO_ROOT, 'node_modules', 'tsx'), join(partial, 'node_modules', 'tsx'));
    writeFileSync(join(partial, '.imagegen-installed'), `${commit}\n`);
    try {
      renameSync(partial, root);
    } catch (err) {
      // Another run installed it meanwhile: use theirs.
      if (!existsSync(marker)) throw err;
      rmSync(partial, { recursive: true, force: true });
    }
  } catch (err) {
    rmSync(partial, { recursive: true, force: true });
    throw err;
  }
  return { commit, version, currentVersion, root, installMs: Date.now() - t0, reused: false };
}
