import { execFile } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../distributed/harness.js';

const CONSOLE = join(REPO_ROOT, 'services/console');
const DIST_INDEX = join(CONSOLE, 'dist/index.html');

function newestSource(dir: string): number {
  let newest = 0;
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = statSync(p);
    newest = Math.max(newest, st.isDirectory() ? newestSource(p) : st.mtimeMs);
  }
  return newest;
}

let building: Promise<void> | undefined;

/**
 * The web console's build (services/console/dist), made by `pnpm install`'s postinstall; built here again when it
 * is missing or older than a source file (a test run right after editing the console), with the same script.
 */
export function ensureConsoleBuilt(): Promise<void> {
  building ??= (async () => {
    const sources = Math.max(
      newestSource(join(CONSOLE, 'src')),
      statSync(join(CONSOLE, 'index.html')).mtimeMs,
      statSync(join(CONSOLE, 'vite.config.ts')).mtimeMs,
    );
    if (existsSync(DIST_INDEX) && statSync(DIST_INDEX).mtimeMs >= sources) return;
    await promisify(execFile)(process.execPath, [join(CONSOLE, 'scripts/build.mjs')], { cwd: REPO_ROOT, timeout: 120_000 });
  })();
  return building;
}
