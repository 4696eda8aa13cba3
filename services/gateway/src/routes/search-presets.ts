import { SEARCH_PRESET_NAME_MAX } from '@imagegen/api-schemas';
import { cursorPagination, imageJson, searchPresetForm } from '@imagegen/operations';
import { badRequest } from '@imagegen/platform';
import type { RouteModule } from '../types.js';

/**
 * Gallery search presets (SPEC 4.6): camelCase bodies and output, the SPEC 7 texts for every body problem
 * (so bodies are checked by hand, not by schema). GET /api/search-presets/:id/images runs a saved preset's
 * filters (sortBy included) against the tenant's images and answers like GET /api/images.
 */

const searchPresetRoutes: RouteModule = (app, { clients }) => {
  const assets = clients.assets;

  app.get('/api/search-presets', async (request) => {
    const res = await assets.listSearchPresets({}, request.principal);
    return { data: res.presets.map(searchPresetForm) };
  });

  app.post('/api/search-presets', async (request) => {
    const b = request.body;
    const body = (b !== null && typeof b === 'object' && !Array.isArray(b) ? b : {}) as Record<string, unknown>;
    if (typeof body.presetName !== 'string') throw badRequest('presetName is required and must be a string');
    const f = body.filters;
    if (f === null || typeof f !== 'object' || Array.isArray(f)) {
      // Name problems first, as the service would report them.
      if (body.presetName.trim() === '') throw badRequest('presetName cannot be empty');
      if (body.presetName.trim().length > SEARCH_PRESET_NAME_MAX)
        throw badRequest(`presetName cannot exceed ${SEARCH_PRESET_NAME_MAX} characters`);
      throw badRequest('filters is required and must be an object');
    }
    const p = await assets.createSearchPreset({ presetName: body.presetName, filtersJson: JSON.stringify(f) }, request.principal);
    return { data: searchPresetForm(p) };
  });

  app.delete('/api/search-presets/:id', async (request) => {
    const { id } = request.params as { id: string };
    await assets.deleteSearchPreset({ identifier: id }, request.principal);
    return { data: { deleted: true } };
  });

  app.get('/api/search-presets/:id/images', async (request) => {
    const { id } = request.params as { id: string };
    const q = request.query as { limit: number; offset: number; cursor?: string };
    const cursor = q.cursor === '' ? undefined : q.cursor;
    const res = await assets.runSearchPreset({ identifier: id, limit: q.limit, offset: q.offset, cursor }, request.principal);
    return {
      data: res.images.map(imageJson),
      pagination: cursorPagination(res),
      preset: res.preset ? searchPresetForm(res.preset) : null,
    };
  });
};

export default searchPresetRoutes;
