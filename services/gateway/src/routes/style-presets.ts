import { AssetsServiceService } from '@imagegen/contracts/library/v1/assets';
import { createClient, stylePresetForm } from '@imagegen/platform';
import type { RouteModule } from '../app.js';
import { offsetParam } from '../validation.js';

/**
 * Style presets (SPEC 4.3), snake_case. The name's length rule answers with the SPEC 7 text
 * 'Preset name must be between 1 and 128 characters' (checked by the service, not the schema).
 */
const TAGS = ['Style presets'];
const nullable = (type: string, extra: Record<string, unknown> = {}) => ({ type: [type, 'null'], ...extra });
const idParams = { type: 'object', required: ['id'], properties: { id: { type: 'string' } } };

const presetFields = {
  prompt: nullable('string', { maxLength: 2048 }),
  negative_prompt: nullable('string', { maxLength: 1024 }),
  system_instruction: nullable('string', { maxLength: 512 }),
  aspect_ratio: nullable('string'),
};

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

const stylePresetRoutes: RouteModule = (app, { ctx }) => {
  const assets = createClient(AssetsServiceService, () => ctx.resolve('library'));
  app.addHook('onClose', async () => assets.close());

  app.get(
    '/api/style-presets',
    {
      schema: {
        tags: TAGS,
        summary: 'List style presets',
        querystring: {
          type: 'object',
          properties: {
            limit: { type: 'integer', minimum: 1, maximum: 100, default: 50 },
            offset: offsetParam,
          },
        },
      },
    },
    async (request) => {
      const q = request.query as { limit: number; offset: number };
      const res = await assets.listStylePresets({ limit: q.limit, offset: q.offset }, request.principal);
      return { data: res.presets.map(stylePresetForm), pagination: { limit: res.limit, offset: res.offset, total: res.total } };
    },
  );

  app.get('/api/style-presets/:id', { schema: { tags: TAGS, summary: 'Get a style preset', params: idParams } }, async (request) => {
    const { id } = request.params as { id: string };
    return { data: stylePresetForm(await assets.getStylePreset({ identifier: id }, request.principal)) };
  });

  app.post(
    '/api/style-presets',
    {
      schema: {
        tags: TAGS,
        summary: 'Create a style preset',
        body: {
          type: 'object',
          properties: { name: { type: ['string', 'null'], description: '1-128 characters, required' }, ...presetFields },
        },
      },
    },
    async (request) => {
      const b = request.body as Record<string, unknown>;
      const p = await assets.createStylePreset(
        {
          name: str(b.name) ?? '',
          prompt: str(b.prompt),
          negativePrompt: str(b.negative_prompt),
          systemInstruction: str(b.system_instruction),
          aspectRatio: str(b.aspect_ratio),
        },
        request.principal,
      );
      return { data: stylePresetForm(p) };
    },
  );

  app.patch(
    '/api/style-presets/:id',
    {
      schema: {
        tags: TAGS,
        summary: 'Update a style preset (new_name renames; null clears prompt, negative_prompt, system_instruction, aspect_ratio)',
        params: idParams,
        body: { type: 'object', properties: { new_name: { type: ['string', 'null'] }, ...presetFields } },
      },
    },
    async (request) => {
      const { id } = request.params as { id: string };
      const b = (request.body ?? {}) as Record<string, unknown>;
      const present = ['new_name', ...Object.keys(presetFields)].filter((k) => k in b);
      const p = await assets.updateStylePreset(
        {
          identifier: id,
          presentFields: present,
          newName: str(b.new_name),
          prompt: str(b.prompt),
          negativePrompt: str(b.negative_prompt),
          systemInstruction: str(b.system_instruction),
          aspectRatio: str(b.aspect_ratio),
        },
        request.principal,
      );
      return { data: stylePresetForm(p) };
    },
  );

  app.delete('/api/style-presets/:id', { schema: { tags: TAGS, summary: 'Delete a style preset', params: idParams } }, async (request) => {
    const { id } = request.params as { id: string };
    await assets.deleteStylePreset({ identifier: id }, request.principal);
    return { data: { deleted: true } };
  });
};

export default stylePresetRoutes;
