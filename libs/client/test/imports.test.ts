import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';

/**
 * The OpenAPI document and the typed client are built without the gateway: `pnpm client` (scripts/generate.ts) and
 * the document builder of @imagegen/api-schemas import nothing under services/, nor fastify. Checked on the real
 * module graph: a child process runs the generator with a resolve hook that refuses any such module, whoever
 * imports it.
 */

const repo = new URL('../../../', import.meta.url);
const generator = new URL('libs/client/scripts/generate.ts', repo).href;

const HOOK = `
const services = ${JSON.stringify(new URL('services/', repo).href)};
export async function resolve(specifier, context, next) {
  const found = await next(specifier, context);
  if (found.url.startsWith(services) || /\\/node_modules\\/(fastify|@fastify\\/[^/]+)\\//.test(found.url))
    throw new Error('refused import: ' + found.url + ' (from ' + context.parentURL + ')');
  return found;
}`;

/** Runs `code` (an ES module) in a child with tsx and the hook above; its exit status and output. */
function withHook(code: string) {
  const script = `import { register } from 'node:module';\nregister('data:text/javascript,' + encodeURIComponent(${JSON.stringify(HOOK)}));\n${code}`;
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: fileURLToPath(repo),
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

test('pnpm client builds the document and the client importing nothing under services/ nor fastify', () => {
  const r = withHook(
    `const { generated } = await import(${JSON.stringify(generator)});\n` +
      'const { document, schema } = await generated();\n' +
      'console.log("paths", Object.keys(JSON.parse(document).paths).length, "schema", schema.length);',
  );
  expect(r.out).toMatch(/^paths \d{2,} schema \d+$/m);
  expect(r.status, r.out).toBe(0);
});

test('the check refuses a module under services/ imported on the way', () => {
  const gatewayTypes = new URL('services/gateway/src/types.ts', repo).href;
  const r = withHook(
    `await import('data:text/javascript,' + encodeURIComponent(${JSON.stringify(`import ${JSON.stringify(gatewayTypes)};`)}));`,
  );
  expect(r.status).not.toBe(0);
  expect(r.out).toContain(`refused import: ${gatewayTypes}`);
});
