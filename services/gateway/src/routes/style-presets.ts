import { type Infer, type StylePresetListQuery, type StylePresetRestInput, StylePresetRestUpdateInput } from '@imagegen/api-schemas';
import { stylePresetForm } from '@imagegen/operations';
import type { RouteModule } from '../types.js';
import { str } from './asset-schemas.js';

/**
 * Style presets (SPEC 4.3), snake_case. The name's length rule answers with the SPEC 7 text
 * 'Preset name must be between 1 and 128 characters' (checked by the service, not the schema).
 */
// A missing (create) or null name reaches the service, which answers it with SPEC 7's text.
type CreateBody = Infer<typeof StylePresetRestInput>;
type UpdateBody = Infer<typeof StylePresetRestUpdateInput>;
const UPDATE_FIELDS = Object.keys(StylePresetRestUpdateInput.shape);

const stylePresetRoutes: RouteModule = (app, { clients }) => {
  const assets = clients.assets;

  app.get('/api/style-presets', async (request) => {
    const q = request.query as Infer<typeof StylePresetListQuery>;
    const res = await assets.listStylePresets({ limit: q.limit, offset: q.offset, cursor: q.cursor, search: q.search }, request.principal);
    return {
      data: res.presets.map(stylePresetForm),
      pagination: { limit: res.limit, offset: res.offset, total: res.total, nextCursor: res.nextCursor ?? null },
    };
  });

  app.get('/api/style-presets/:id', async (request) => {
    const { id } = request.params as { id: string };
    return { data: stylePresetForm(await assets.getStylePreset({ identifier: id }, request.principal)) };
  });

  app.post('/api/style-presets', async (request) => {
    const b = request.body as CreateBody;
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
  });

  app.patch('/api/style-presets/:id', async (request) => {
    const { id } = request.params as { id: string };
    const b = (request.body ?? {}) as UpdateBody;
    const p = await assets.updateStylePreset(
      {
        identifier: id,
        presentFields: UPDATE_FIELDS.filter((k) => k in b),
        newName: str(b.new_name),
        prompt: str(b.prompt),
        negativePrompt: str(b.negative_prompt),
        systemInstruction: str(b.system_instruction),
        aspectRatio: str(b.aspect_ratio),
      },
      request.principal,
    );
    return { data: stylePresetForm(p) };
  });

  app.delete('/api/style-presets/:id', async (request) => {
    const { id } = request.params as { id: string };
    await assets.deleteStylePreset({ identifier: id }, request.principal);
    return { data: { deleted: true } };
  });
};

export default stylePresetRoutes;
