import type { Clients } from '@imagegen/operations';
import { memoryIdempotencyStore } from '@imagegen/operations';
import { AppError, createLogger } from '@imagegen/platform';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { afterEach, describe, expect, it } from 'vitest';
import type { McpAuth } from '../src/auth.js';
import { defineTool, ERROR_META, registerTools, type ToolDef } from '../src/tools/framework.js';
import { ALL_TOOLS } from '../src/tools/index.js';
import { TOOL_OUTPUTS } from '../src/tools/outputs.js';

/**
 * Every tool publishes its outputSchema (the REST twin's answer, outputs.ts); the SDK client, which validates
 * structuredContent against it after tools/list, accepts both successful and failed results. The gRPC clients
 * are stubs answering the messages the services send.
 */

const logger = createLogger('mcp-test', 'silent');
const TS = '2026-11-25T12:00:00.000Z';
const preset = { id: 7, name: 'Watercolour', prompt: 'soft watercolour,', createdAt: TS, updatedAt: TS };

let stylePresetCalls = 0;
const grpc: Record<string, Record<string, (req: any) => Promise<unknown>>> = {
  tenancy: {
    getTenant: async () => ({ tenantId: 't1', tenantName: 'T1', modelId: 'provA-flash-lite-image', allowedModels: [] }),
  },
  assets: {
    createStylePreset: async () => {
      stylePresetCalls++;
      return preset;
    },
    getStylePreset: async (req) => {
      if (req.identifier !== '7') throw new AppError(404, { error: 'Style preset not found' });
      return preset;
    },
  },
};
const clients = new Proxy({} as Clients, {
  get: (_t, service: string) =>
    new Proxy(
      {},
      {
        get: (_s, method: string) => grpc[service]?.[method] ?? (async () => Promise.reject(new Error(`unexpected ${service}.${method}`))),
      },
    ),
});

async function connect(tools: ToolDef[] = ALL_TOOLS, scopes?: string[]) {
  const server = new McpServer({ name: 'imagegen-test', version: '1.0.0' }, { capabilities: { tools: {} } });
  const auth: McpAuth = { kind: scopes ? 'oauth' : 'api_key', tenantId: 't1', keyType: 'live', scopes };
  registerTools(server, tools, { clients, logger, publicBaseUrl: 'http://localhost', idempotency: memoryIdempotencyStore() }, () => auth);
  const [a, b] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'imagegen-test', version: '1.0.0' });
  await server.connect(a);
  await client.connect(b);
  open.push(client, server);
  return client;
}
const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const c of open.splice(0)) await c.close();
});

describe('outputSchema', () => {
  it('every tool publishes one, an object schema the SDK validator compiles', async () => {
    const client = await connect();
    const { tools } = await client.listTools();
    expect(tools).toHaveLength(50);
    expect(Object.keys(TOOL_OUTPUTS).sort()).toEqual(tools.map((t) => t.name).sort());
    const ajv = new AjvJsonSchemaValidator();
    for (const t of tools) {
      expect(t.outputSchema?.type, t.name).toBe('object');
      expect(() => ajv.getValidator(t.outputSchema as never), t.name).not.toThrow();
    }
    // Not a schema that admits anything: a profile without its quotas is refused.
    const profile = ajv.getValidator(tools.find((t) => t.name === 'get_profile')?.outputSchema as never);
    expect(profile({ tenant: { tenantId: 't1', tenantName: 'T1' } }).valid).toBe(false);
  });

  it('the SDK client accepts successes, the idempotent replay and errors (status and details in _meta)', async () => {
    const client = await connect();
    await client.listTools(); // the client validates structuredContent from here on

    const models = await client.callTool({ name: 'list_models', arguments: {} });
    expect(models.isError).toBeFalsy();
    expect(models.structuredContent).toMatchObject({ defaultModel: 'provA-flash-lite-image' });

    const args = { name: 'Watercolour', prompt: 'soft watercolour,', idempotency_key: 'k-1' };
    const first = await client.callTool({ name: 'create_style_preset', arguments: args });
    const again = await client.callTool({ name: 'create_style_preset', arguments: args });
    expect(first.structuredContent).toMatchObject({ data: { id: 7, name: 'Watercolour', negative_prompt: null } });
    expect(again.structuredContent).toEqual(first.structuredContent);
    expect(again._meta).toMatchObject({ 'imagegen/idempotent-replayed': true });
    expect(stylePresetCalls).toBe(1);

    const missing = await client.callTool({ name: 'get_style_preset', arguments: { identifier: 8 } });
    expect(missing).toMatchObject({ isError: true, content: [{ type: 'text', text: 'Style preset not found' }] });
    expect(missing.structuredContent).toBeUndefined();
    expect(missing._meta?.[ERROR_META]).toEqual({ status: 404, error: 'Style preset not found' });

    const invalid = await client.callTool({ name: 'create_style_preset', arguments: { prompt: 3, colour: 'red' } });
    expect(invalid.isError).toBe(true);
    expect(invalid._meta?.[ERROR_META]).toMatchObject({ status: 400, error: 'Invalid request payload' });
    expect(invalid._meta?.[ERROR_META]).toMatchObject({ details: expect.arrayContaining(['colour is not allowed']) });

    // A replayed 422 carries its status in _meta too.
    const mismatch = await client.callTool({ name: 'create_style_preset', arguments: { ...args, name: 'Other' } });
    expect(mismatch._meta?.[ERROR_META]).toMatchObject({ status: 422, error: 'Idempotency-Key already used for a different request' });
  });

  it('refuses a token without the scope with the one missingScopes rule', async () => {
    const client = await connect(ALL_TOOLS, ['analytics:read']);
    const r = await client.callTool({ name: 'create_style_preset', arguments: { name: 'x' } });
    expect(r._meta?.[ERROR_META]).toEqual({
      status: 403,
      error: 'Insufficient scope: create_style_preset requires styles:manage',
      required_scopes: ['styles:manage'],
    });
    const any = await client.callTool({ name: 'list_models', arguments: {} });
    expect(any._meta?.[ERROR_META]).toMatchObject({
      error: 'Insufficient scope: list_models requires one of images:generate, images:edit, images:read',
    });
  });

  it('the server refuses a result that does not match the schema', async () => {
    const liar = defineTool({
      name: 'get_profile',
      description: 'A get_profile whose result lacks the quotas.',
      scopes: ['analytics:read'],
      input: {},
      run: async () => ({ data: { tenant: { tenantId: 't1', tenantName: 'T1' } } }),
    });
    const client = await connect([liar as ToolDef]);
    const r = await client.callTool({ name: 'get_profile', arguments: {} });
    expect(r.isError).toBe(true);
    expect((r.content as { text: string }[])[0]?.text).toContain('Output validation error');
  });
});
