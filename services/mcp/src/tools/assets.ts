import {
  CreateProductRequest,
  CreateSceneRequest,
  CreateSearchPresetRequest,
  CreateStylePresetRequest,
  ListProductsRequest,
  ListStylePresetsRequest,
  RunSearchPresetRequest,
  UpdateProductRequest,
  UpdateSceneRequest,
  UpdateStylePresetRequest,
} from '@imagegen/contracts/library/v1/assets';
import {
  imageJson,
  invalidPayload,
  productCreatedJson,
  productDetail,
  productImagesJson,
  productListForm,
  productUpdateJson,
  sceneDetail,
  sceneListForm,
  searchPresetForm,
  stylePresetForm,
} from '@imagegen/platform';
import { z } from 'zod';
import { scenePromptWithDetails } from './characters.js';
import { deleteTool, getTool, listTool, orUndef, presentOf } from './crud.js';
import { defineTool, ID_MAX, INT32_MAX, idString, s } from './framework.js';
import { GENERATION_TIMEOUT_MS, newSessionId, runGeneration, thumbnailsOfGenerated } from './generation-run.js';

// ---- products (SPEC 4.4) ----

const listProducts = defineTool({
  name: 'list_products',
  description: 'List saved products (page/page_size; search in name, description and tags).',
  scopes: ['products:read'],
  input: {
    page: z.number().int().min(1).max(INT32_MAX).optional().describe('1-based page (default 1)'),
    page_size: s.limit(20, 100),
    search: z.string().min(1).max(200).optional().describe('Search in name, description and tags'),
  },
  annotations: { readOnlyHint: true },
  async run(args, ctx) {
    const r = await ctx.deps.clients.assets.listProducts(
      ListProductsRequest.fromPartial({ page: args.page ?? 1, pageSize: args.page_size ?? 20, search: args.search }),
      ctx.principal,
    );
    return {
      data: {
        data: r.products.map(productListForm),
        pagination: { page: r.page, pageSize: r.pageSize, total: r.total, hasMore: r.hasMore },
      },
    };
  },
});

const getProduct = getTool({
  name: 'get_product',
  description: 'Get a saved product by id or name.',
  scopes: ['products:read'],
  address: { identifier: 'Product' },
  get: (assets, req, principal) => assets.getProduct(req, principal),
  form: productDetail,
});

const createProduct = defineTool({
  name: 'create_product',
  description: 'Save a product from a public image URL (the image is fetched and stored).',
  scopes: ['products:manage'],
  input: {
    product_name: z.string().min(1).max(100).describe('Unique name (max 100)'),
    product_url: z.string().min(1).max(2048).describe('Public HTTP or HTTPS image URL'),
    product_description: z.string().max(500).optional().describe('Description (max 500)'),
    tags: z.string().max(1100).optional().describe('Comma-separated tags (each max 50)'),
  },
  annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  async run(args, ctx) {
    const p = await ctx.deps.clients.assets.createProduct(
      CreateProductRequest.fromPartial({
        productName: args.product_name,
        productUrl: args.product_url,
        productDescription: args.product_description,
        tags: args.tags,
      }),
      ctx.principal,
      { timeoutMs: 120_000 },
    );
    return { data: { data: productCreatedJson(p) } };
  },
});

const updateProduct = defineTool({
  name: 'update_product',
  description: 'Change a product name, description or tags (only given fields change).',
  scopes: ['products:manage'],
  input: {
    identifier: s.identifier('Product'),
    product_name: z.string().min(1).max(100).optional().describe('New name'),
    product_description: z.string().max(500).nullable().optional().describe('Description (null clears)'),
    tags: z.string().max(1100).nullable().optional().describe('Comma-separated tags (null clears)'),
  },
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
  async run(args, ctx) {
    const p = await ctx.deps.clients.assets.updateProduct(
      UpdateProductRequest.fromPartial({
        identifier: idString(args.identifier),
        presentFields: presentOf(args, ['product_name', 'product_description', 'tags']),
        productName: args.product_name,
        productDescription: orUndef(args.product_description),
        tags: orUndef(args.tags),
      }),
      ctx.principal,
    );
    return { data: { data: productUpdateJson(p) } };
  },
});

const deleteProduct = deleteTool({
  name: 'delete_product',
  description: 'Delete a product and its stored image (generated images stay).',
  scopes: ['products:manage'],
  address: { identifier: 'Product' },
  del: (assets, req, principal) => assets.deleteProduct(req, principal),
});

const generateProductImage = defineTool({
  name: 'generate_product_image',
  description: 'Generate 1-4 images featuring a saved product in a scene.',
  scopes: ['images:generate', 'products:read'],
  input: {
    identifier: s.identifier('Product'),
    scene_prompt: z.string().min(1).max(1500).describe('The scene (max 1500 characters)'),
    additional_details: z.string().max(500).optional().describe('Extra details (max 500)'),
    aspect_ratio: z.enum(['1:1', '16:9', '9:16', '4:3', '3:4']).optional().describe('Aspect ratio'),
    negative_prompt: z.string().max(1024).optional().describe('What to avoid'),
    number_of_images: z.number().int().min(1).max(4).optional().describe('1-4 (default 1)'),
    session_id: s.sessionId(),
  },
  annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  async run(args, ctx) {
    if (args.scene_prompt.trim() === '') throw invalidPayload(['scene_prompt cannot be empty']);
    const product = await ctx.deps.clients.assets.getProduct({ identifier: idString(args.identifier) }, ctx.principal);
    const sessionId = args.session_id ?? newSessionId();
    return runGeneration(ctx, {
      sessionId,
      call: async (principal, executionId) => {
        const res = await ctx.deps.clients.generation.generateImages(
          {
            prompt: scenePromptWithDetails(args.scene_prompt, args.additional_details),
            productId: product.id,
            aspectRatio: args.aspect_ratio,
            negativePrompt: args.negative_prompt,
            n: args.number_of_images ?? 1,
            sessionId,
            toolName: 'generate_product_image',
            executionId,
          },
          principal,
          { timeoutMs: GENERATION_TIMEOUT_MS },
        );
        return {
          executionId: res.executionId,
          data: { data: productImagesJson(res, product, args.scene_prompt), executionId: res.executionId },
          images: await thumbnailsOfGenerated({ ...ctx, principal }, res.images),
        };
      },
    });
  },
});

// ---- scenes (SPEC 4.5) ----

const listScenes = listTool({
  name: 'list_scenes',
  description: 'List saved scenes (search by name, sort by name, created, used or recent).',
  scopes: ['styles:read'],
  list: (assets, query, principal) => assets.listScenes(query, principal),
  items: (r) => r.scenes,
  form: sceneListForm,
});

const getScene = getTool({
  name: 'get_scene',
  description: 'Get a saved scene by id or name, with its reference images.',
  scopes: ['styles:read'],
  address: { identifier: 'Scene' },
  get: (assets, req, principal) => assets.getScene(req, principal),
  form: sceneDetail,
});

const sceneFields = {
  description: z.string().max(500).nullable().optional().describe('Description (max 500)'),
  scene_prompt: z.string().max(4000).nullable().optional().describe('Prompt prefix (max 4000)'),
  reference_image_ids: z
    .array(z.number().int().min(1).max(ID_MAX))
    .max(20)
    .optional()
    .describe('Existing library image ids (up to 20 with the URLs)'),
  reference_image_urls: z.array(z.string().min(1).max(2048)).max(20).optional().describe('Public image URLs to fetch and add'),
  default_reference_mode: z.enum(['style', 'add']).nullable().optional().describe('style or add'),
  preferred_aspect_ratio: z.string().nullable().optional().describe('Default aspect ratio for generation'),
  tags: z.array(z.string().max(50)).max(20).nullable().optional().describe('Up to 20 tags'),
};

/** The scene fields of a create or update request (null clears: it travels as absent, named in presentFields). */
function sceneValues(args: z.infer<z.ZodObject<typeof sceneFields>>) {
  return {
    description: orUndef(args.description),
    scenePrompt: orUndef(args.scene_prompt),
    referenceImageIds: args.reference_image_ids ?? [],
    referenceImageUrls: args.reference_image_urls ?? [],
    defaultReferenceMode: orUndef(args.default_reference_mode),
    preferredAspectRatio: orUndef(args.preferred_aspect_ratio),
    tags: args.tags ?? [],
  };
}

const createScene = defineTool({
  name: 'create_scene',
  description: 'Create a saved scene from a prompt and/or reference images (ids or URLs).',
  scopes: ['styles:manage'],
  input: { scene_name: z.string().min(1).max(100).describe('Unique name (1-100)'), ...sceneFields },
  annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  async run(args, ctx) {
    const sc = await ctx.deps.clients.assets.createScene(
      CreateSceneRequest.fromPartial({
        sceneName: args.scene_name,
        ...sceneValues(args),
      }),
      ctx.principal,
      { timeoutMs: 120_000 },
    );
    return { data: { data: sceneDetail(sc) } };
  },
});

const updateScene = defineTool({
  name: 'update_scene',
  description: 'Change a scene; only given fields change (null clears; reference_image_ids replace, URLs add).',
  scopes: ['styles:manage'],
  input: { identifier: s.identifier('Scene'), new_scene_name: z.string().min(1).max(100).optional().describe('New name'), ...sceneFields },
  // reference_image_urls are fetched from the public web
  annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  async run(args, ctx) {
    const sc = await ctx.deps.clients.assets.updateScene(
      UpdateSceneRequest.fromPartial({
        identifier: idString(args.identifier),
        presentFields: presentOf(args, [
          'new_scene_name',
          'description',
          'scene_prompt',
          'reference_image_ids',
          'reference_image_urls',
          'default_reference_mode',
          'preferred_aspect_ratio',
          'tags',
        ]),
        newSceneName: args.new_scene_name,
        ...sceneValues(args),
      }),
      ctx.principal,
      { timeoutMs: 120_000 },
    );
    return { data: { data: sceneDetail(sc) } };
  },
});

const deleteScene = deleteTool({
  name: 'delete_scene',
  description: 'Delete a saved scene (its reference images stay in the library).',
  scopes: ['styles:manage'],
  address: { identifier: 'Scene' },
  del: (assets, req, principal) => assets.deleteScene(req, principal),
  form: (r) => ({ deleted: r.deleted, sceneId: r.sceneId, sceneName: r.sceneName, imageCount: r.imageCount }),
});

// ---- style presets (SPEC 4.3) ----

const listStylePresets = defineTool({
  name: 'list_style_presets',
  description: 'List saved style presets.',
  scopes: ['styles:read'],
  input: { limit: s.limit(50, 100), offset: s.offset() },
  annotations: { readOnlyHint: true },
  async run(args, ctx) {
    const r = await ctx.deps.clients.assets.listStylePresets(
      ListStylePresetsRequest.fromPartial({ limit: args.limit ?? 50, offset: args.offset ?? 0 }),
      ctx.principal,
    );
    return { data: { data: r.presets.map(stylePresetForm), pagination: { limit: r.limit, offset: r.offset, total: r.total } } };
  },
});

const getStylePreset = getTool({
  name: 'get_style_preset',
  description: 'Get a saved style preset by id or name.',
  scopes: ['styles:read'],
  address: { identifier: 'Style preset' },
  get: (assets, req, principal) => assets.getStylePreset(req, principal),
  form: stylePresetForm,
});

const createStylePreset = defineTool({
  name: 'create_style_preset',
  description: 'Create a style preset (prompt prefix, negative prompt, system instruction, aspect ratio).',
  scopes: ['styles:manage'],
  input: {
    name: z.string().describe('Unique name (1-128 characters)'),
    prompt: z.string().max(2048).optional().describe('Prepended to prompts (max 2048)'),
    negative_prompt: z.string().max(1024).optional().describe('Used when a request has none (max 1024)'),
    system_instruction: z.string().max(512).optional().describe('Guides the model (max 512)'),
    aspect_ratio: z.string().optional().describe('Used when a request has none'),
  },
  annotations: { readOnlyHint: false, destructiveHint: false },
  async run(args, ctx) {
    const p = await ctx.deps.clients.assets.createStylePreset(
      CreateStylePresetRequest.fromPartial({
        name: args.name,
        prompt: args.prompt,
        negativePrompt: args.negative_prompt,
        systemInstruction: args.system_instruction,
        aspectRatio: args.aspect_ratio,
      }),
      ctx.principal,
    );
    return { data: { data: stylePresetForm(p) } };
  },
});

const updateStylePreset = defineTool({
  name: 'update_style_preset',
  description: 'Change a style preset; only given fields change (null clears prompt, negative_prompt, system_instruction, aspect_ratio).',
  scopes: ['styles:manage'],
  input: {
    identifier: s.identifier('Style preset'),
    new_name: z.string().optional().describe('New name (1-128 characters)'),
    prompt: z.string().max(2048).nullable().optional().describe('Prompt prefix (null clears)'),
    negative_prompt: z.string().max(1024).nullable().optional().describe('Negative prompt (null clears)'),
    system_instruction: z.string().max(512).nullable().optional().describe('System instruction (null clears)'),
    aspect_ratio: z.string().nullable().optional().describe('Aspect ratio (null clears)'),
  },
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
  async run(args, ctx) {
    const p = await ctx.deps.clients.assets.updateStylePreset(
      UpdateStylePresetRequest.fromPartial({
        identifier: idString(args.identifier),
        presentFields: presentOf(args, ['new_name', 'prompt', 'negative_prompt', 'system_instruction', 'aspect_ratio']),
        newName: args.new_name,
        prompt: orUndef(args.prompt),
        negativePrompt: orUndef(args.negative_prompt),
        systemInstruction: orUndef(args.system_instruction),
        aspectRatio: orUndef(args.aspect_ratio),
      }),
      ctx.principal,
    );
    return { data: { data: stylePresetForm(p) } };
  },
});

const deleteStylePreset = deleteTool({
  name: 'delete_style_preset',
  description: 'Delete a style preset.',
  scopes: ['styles:manage'],
  address: { identifier: 'Style preset' },
  del: (assets, req, principal) => assets.deleteStylePreset(req, principal),
});

// ---- gallery search presets (SPEC 4.6) ----

const searchFilters = z
  .object({
    search: z.string().optional(),
    searchMode: z.enum(['exact', 'all', 'any']).optional(),
    dateFrom: z.string().optional(),
    dateTo: z.string().optional(),
    aspectRatio: z.string().optional(),
    operationType: z.string().optional(),
    minSize: z.number().min(0).max(ID_MAX).optional(),
    maxSize: z.number().min(0).max(ID_MAX).optional(),
    sessionId: z.string().optional(),
    hasNegativePrompt: z.boolean().optional(),
    sortBy: z.enum(['newest', 'oldest', 'largest', 'smallest']).optional(),
  })
  .passthrough()
  .describe(
    'Gallery filters: search, searchMode, dateFrom, dateTo, aspectRatio, operationType, minSize, maxSize, sessionId, hasNegativePrompt, sortBy',
  );

const listSearchPresets = defineTool({
  name: 'list_search_presets',
  description: 'List saved gallery search presets.',
  scopes: ['images:read'],
  input: {},
  annotations: { readOnlyHint: true },
  async run(_args, ctx) {
    const r = await ctx.deps.clients.assets.listSearchPresets({}, ctx.principal);
    return { data: { data: r.presets.map(searchPresetForm) } };
  },
});

const createSearchPreset = defineTool({
  name: 'create_search_preset',
  description: 'Save a named set of gallery filters.',
  scopes: ['images:read'],
  input: { preset_name: z.string().describe('Unique name (1-50 characters)'), filters: searchFilters },
  annotations: { readOnlyHint: false, destructiveHint: false },
  async run(args, ctx) {
    const p = await ctx.deps.clients.assets.createSearchPreset(
      CreateSearchPresetRequest.fromPartial({ presetName: args.preset_name, filtersJson: JSON.stringify(args.filters) }),
      ctx.principal,
    );
    return { data: { data: searchPresetForm(p) } };
  },
});

const deleteSearchPreset = deleteTool({
  name: 'delete_search_preset',
  description: 'Delete a saved gallery search preset.',
  scopes: ['images:read'],
  address: { id: 'Search preset id' },
  del: (assets, req, principal) => assets.deleteSearchPreset(req, principal),
});

const runSearchPreset = defineTool({
  name: 'run_search_preset',
  description: "Run a saved search preset's filters against the image library.",
  scopes: ['images:read'],
  input: { id: s.id('Search preset id'), limit: s.limit(20, 100), offset: s.offset() },
  annotations: { readOnlyHint: true },
  async run(args, ctx) {
    const r = await ctx.deps.clients.assets.runSearchPreset(
      RunSearchPresetRequest.fromPartial({ identifier: String(args.id), limit: args.limit ?? 20, offset: args.offset ?? 0 }),
      ctx.principal,
    );
    return {
      data: {
        preset: r.preset ? searchPresetForm(r.preset) : null,
        data: r.images.map(imageJson),
        pagination: { total: r.total, limit: r.limit, offset: r.offset },
      },
    };
  },
});

export const productTools = [listProducts, getProduct, createProduct, updateProduct, deleteProduct, generateProductImage];
export const sceneTools = [listScenes, getScene, createScene, updateScene, deleteScene];
export const styleTools = [listStylePresets, getStylePreset, createStylePreset, updateStylePreset, deleteStylePreset];
export const searchPresetTools = [listSearchPresets, createSearchPreset, deleteSearchPreset, runSearchPreset];
