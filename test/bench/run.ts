import { benchGateway } from './gateway.js';

/**
 * `pnpm bench [name...]`: every benchmark, or the named ones (gateway, generation, library, usage, scale,
 * generate-path, session-detail, async, files, tenant-data, console-gallery).
 * Each prints its figures and the ratio against a baseline measured in the same run. `scale` (issue 16: 2M
 * seeded rows, several minutes), `session-detail`, `tenant-data` and `console-gallery` (Chromium) run only when named:
 * `pnpm bench scale`.
 */
const all: Record<string, () => Promise<void>> = {
  gateway: benchGateway,
  generation: async () => (await import('./generation.js')).benchGeneration(),
  library: async () => (await import('./library.js')).benchLibrary(),
  usage: async () => (await import('./usage.js')).benchUsage(),
  scale: async () => (await import('./scale.js')).benchScale(),
  'generate-path': async () => (await import('./generate-path.js')).benchGeneratePath(),
  'session-detail': async () => (await import('./session-detail.js')).benchSessionDetail(),
  async: async () => (await import('./async.js')).benchAsync(),
  files: async () => (await import('./files.js')).benchFiles(),
  'tenant-data': async () => (await import('./tenant-data.js')).benchTenantData(),
  'console-gallery': async () => (await import('./console-gallery.js')).benchConsoleGallery(),
};
const explicitOnly = new Set(['scale', 'session-detail', 'tenant-data', 'console-gallery']);
const wanted = process.argv.slice(2).filter((a) => !a.startsWith('-'));
for (const name of wanted.length ? wanted : Object.keys(all).filter((n) => !explicitOnly.has(n))) {
  const run = all[name];
  if (!run) throw new Error(`unknown benchmark ${name}; expected ${Object.keys(all).join(', ')}`);
  await run();
}
process.exit(0);
