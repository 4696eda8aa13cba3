// Builds the web console into services/console/dist with Vite's API (no global tool needed). The root package.json's
// postinstall runs it, so `pnpm install` then `pnpm start` serves /console on a fresh machine; `pnpm console`
// rebuilds after a change. IMAGEGEN_SKIP_CONSOLE_BUILD=1 skips it (the image's production install, whose console
// is built in a stage of its own: deploy/Dockerfile).
import { fileURLToPath } from 'node:url';

if (process.env.IMAGEGEN_SKIP_CONSOLE_BUILD === '1') {
  console.log('console: build skipped (IMAGEGEN_SKIP_CONSOLE_BUILD=1)');
  process.exit(0);
}
const root = fileURLToPath(new URL('..', import.meta.url));
const { build } = await import('vite');
await build({ root, configFile: `${root}vite.config.ts`, logLevel: process.env.CONSOLE_BUILD_LOG ?? 'warn' });
console.log(`console: built into ${root}dist`);
