// Builds the web console into services/console/dist with Vite's API (no global tool needed). The root package.json's
// postinstall runs it, so `pnpm install` then `pnpm start` serves /console on a fresh machine; `pnpm console`
// rebuilds after a change. IMAGEGEN_SKIP_CONSOLE_BUILD=1 skips it (the image's production install, whose console
// is built in a stage of its own: deploy/Dockerfile).
//
// The build goes to a folder of its own and then replaces dist in one rename, so a gateway starting meanwhile (it
// reads dist once, at start) sees the previous build or the new one, never a half-written or emptied folder.
import { randomBytes } from 'node:crypto';
import { existsSync, renameSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

if (process.env.IMAGEGEN_SKIP_CONSOLE_BUILD === '1') {
  console.log('console: build skipped (IMAGEGEN_SKIP_CONSOLE_BUILD=1)');
  process.exit(0);
}
const root = fileURLToPath(new URL('..', import.meta.url));
const dist = `${root}dist`;
const fresh = `${root}.dist-${process.pid}-${randomBytes(3).toString('hex')}`;
const old = `${fresh}-old`;
const { build } = await import('vite');
try {
  await build({ root, configFile: `${root}vite.config.ts`, logLevel: process.env.CONSOLE_BUILD_LOG ?? 'warn', build: { outDir: fresh } });
  if (existsSync(dist)) renameSync(dist, old);
  renameSync(fresh, dist);
} finally {
  rmSync(fresh, { recursive: true, force: true });
  rmSync(old, { recursive: true, force: true });
}
console.log(`console: built into ${dist}`);
