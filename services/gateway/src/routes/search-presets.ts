import { IdParams, SEARCH_PRESET_NAME_MAX, SearchPresetImagesQuery } from '@imagegen/api-schemas';
import { cursorPagination, imageJson, searchPresetForm } from '@imagegen/operations';
import { badRequest } from '@imagegen/platform';
import type { RouteModule } from '../types.js';
import { wireSchema } from '../validation.js';

/**
 * Gallery search presets (SPEC 4.6): camelCase bodies and output, the SPEC 7 texts for every body problem
 * (so bodies are checked by hand, not by schema). GET /api/search-presets/:id/images runs a saved preset's
 * filters (sortBy included) against the tenant's images and answers like GET /api/images.
 */

const searchPresetRoutes: RouteModule = (app, { clients }) => {
  const assets = clients.assets;

  app.get('/api/search-presets', { schema: { summary: 'List gallery search presets' } }, async (request) => {
    const res = await assets.listSearchPresets({}, request.principal);
    return { data: res.presets.map(searchPresetForm) };
  });

  app.post(
    '/api/search-presets',
    {
      schema: {
        summary: 'Save a gallery search preset',
        description:
          `Body: {presetName (1-${SEARCH_PRESET_NAME_MAX}), filters: ` +
          '{ {search, searchMode (exact|all|any), dateFrom, dateTo, aspectRatio, ' +
          'operationType (generate|edit), minSize, maxSize, sessionId, hasNegativePrompt, sortBy (newest|oldest|largest|smallest)}}',
      },
    },
    async (request) => {
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
    },
  );

  app.delete(
    '/api/search-presets/:id',
    { schema: { summary: 'Delete a search preset', params: wireSchema(IdParams) } },
    async (request) => {
      const { id } = request.params as { id: string };
      await assets.deleteSearchPreset({ identifier: id }, request.principal);
      return { data: { deleted: true } };
    },
  );

  app.get(
    '/api/search-presets/:id/images',
    {
      schema: {
        summary: "Run a saved search preset against the image list (same shape as GET /api/images, sorted by the preset's sortBy)",
        params: wireSchema(IdParams),
        querystring: wireSchema(SearchPresetImagesQuery),
      },
    },
    async (request) => {
      const { id } = request.params as { id: string };
      const q = request.query as { limit: number; offset: number; cursor?: string };
      const cursor = q.cursor === '' ? undefined : q.cursor;
      const res = await assets.runSearchPreset({ identifier: id, limit: q.limit, offset: q.offset, cursor }, request.principal);
      return {
        data: res.images.map(imageJson),
        pagination: cursorPagination(res),
        preset: res.preset ? searchPresetForm(res.preset) : null,
      };
    },
  );
};

export default searchPresetRoutes;
