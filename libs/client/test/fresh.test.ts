import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { generated } from '../scripts/generate.js';

test('the generated client matches the gateway OpenAPI document (run `pnpm client` when this fails)', async () => {
  const { document, schema } = await generated();
  expect(readFileSync(new URL('../openapi.json', import.meta.url), 'utf8')).toBe(document);
  expect(readFileSync(new URL('../src/schema.ts', import.meta.url), 'utf8')).toBe(schema);
});
