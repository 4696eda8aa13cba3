import {
  ProductBody,
  ProductGenerateBody,
  ProductListQuery,
  ProductUpdateBody,
  SceneInput,
  SceneUpdateInput,
  SearchPresetImagesQuery,
  SearchPresetInput,
  StylePresetInput,
  StylePresetListQuery,
  StylePresetUpdateInput,
} from '@imagegen/api-schemas';
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
  cursorPagination,
  GENERATE_DEADLINE_MS,
  imageJson,
  productCreatedJson,
  productDetail,
  productImagesJson,
  productListForm,
  productUpdateJson,
  sceneDetail,
  sceneListForm,
  scenePromptWithDetails,
  searchPresetForm,
  stylePresetForm,
} from '@imagegen/operations';
import { invalidPayload } from '@imagegen/platform';
import type { z } from 'zod';
import { deleteTool, getTool, listTool, orUndef, presentOf } from './crud.js';
import { defineTool, idString, s } from './framework.js';
import { newSessionId, runGeneration, thumbnailsOfGenerated } from './generation-run.js';

// ---- products (SPEC 4.4) ----

const listProducts = defineTool({
  name: 'list_products',
  description: 'List saved products (page/page_size; search in name, description and tags).',
  operation: 'GET /api/products',
  input: ProductListQuery.shape,
  annotations: { readOnlyHint: true },
  async run(args, ctx) {
    const r = await ctx.deps.clients.assets.listProducts(
      ListProductsRequest.fromPartial({ page: args.page, pageSize: args.page_size, search: args.search, cursor: args.cursor }),
      ctx.principal,
    );
    return {
      data: {
        data: r.products.map(productListForm),
        pagination: { page: r.page, pageSize: r.pageSize, total: r.total, hasMore: r.hasMore, nextCursor: r.nextCursor ?? null },
      },
    };
  },
});

const getProduct = getTool({
  name: 'get_product',
  description: 'Get a saved product by id or name.',
  operation: 'GET /api/products/:identifier',
  address: { identifier: 'Product' },
  get: (assets, req, principal) => assets.getProduct(req, principal),
  form: productDetail,
});

const createProduct = defineTool({
  name: 'create_product',
  description: 'Save a product from a public image URL (the image is fetched and stored).',
  operation: 'POST /api/products',
  input: ProductBody.shape,
  annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  async run(args, ctx) {
    const p = await ctx.deps.clients.assets.createProduct(
      CreateProductRequest.fromPartial({
        productName: args.product_name,
        productUrl: args.product_url,
        productDescription: orUndef(args.product_description),
        tags: orUndef(args.tags),
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
  operation: 'PATCH /api/products/:identifier',
  input: { identifier: s.identifier('Product'), ...ProductUpdateBody.shape },
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
  async run(args, ctx) {
    const p = await ctx.deps.clients.assets.updateProduct(
      UpdateProductRequest.fromPartial({
        identifier: idString(args.identifier),
        presentFields: presentOf(args, Object.keys(ProductUpdateBody.shape)),
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
  operation: 'DELETE /api/products/:identifier',
  address: { identifier: 'Product' },
  del: (assets, req, principal) => assets.deleteProduct(req, principal),
});

const generateProductImage = defineTool({
  name: 'generate_product_image',
  description: 'Generate 1-4 images featuring a saved product in a scene.',
  operation: 'POST /api/products/:identifier/generate',
  input: { identifier: s.identifier('Product'), ...ProductGenerateBody.shape },
  annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  async run(args, ctx) {
    if (args.scene_prompt.trim() === '') throw invalidPayload(['scene_prompt cannot be empty']);
    const product = await ctx.deps.clients.assets.getProduct({ identifier: idString(args.identifier) }, ctx.principal);
    const sessionId = args.session_id ?? newSessionId();
    return runGeneration(ctx, {
      sessionId,
      call: async (principal, executionId) => {
        const res = await ctx.deps.clients.generating.generateImages(
          {
            prompt: scenePromptWithDetails(args.scene_prompt, args.additional_details),
            productId: product.id,
            aspectRatio: args.aspect_ratio,
            negativePrompt: orUndef(args.negative_prompt),
            n: args.number_of_images,
            sessionId,
            toolName: 'generate_product_image',
            executionId,
          },
          principal,
          { timeoutMs: GENERATE_DEADLINE_MS },
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
  operation: 'GET /api/scenes',
  list: (assets, query, principal) => assets.listScenes(query, principal),
  items: (r) => r.scenes,
  form: sceneListForm,
});

const getScene = getTool({
  name: 'get_scene',
  description: 'Get a saved scene by id or name, with its reference images.',
  operation: 'GET /api/scenes/:identifier',
  address: { identifier: 'Scene' },
  get: (assets, req, principal) => assets.getScene(req, principal),
  form: sceneDetail,
});

/** The scene fields of a create or update request (null clears: it travels as absent, named in presentFields). */
function sceneValues(args: Omit<z.infer<typeof SceneUpdateInput>, 'new_scene_name'>) {
  return {
    description: orUndef(args.description),
    scenePrompt: orUndef(args.scene_prompt),
    referenceImageIds: (args.reference_image_ids as number[] | null | undefined) ?? [],
    referenceImageUrls: (args.reference_image_urls as string[] | null | undefined) ?? [],
    defaultReferenceMode: orUndef(args.default_reference_mode),
    preferredAspectRatio: orUndef(args.preferred_aspect_ratio),
    tags: args.tags ?? [],
  };
}

const createScene = defineTool({
  name: 'create_scene',
  description: 'Create a saved scene from a prompt and/or reference images (ids or URLs).',
  operation: 'POST /api/scenes',
  input: SceneInput.shape,
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
  operation: 'PATCH /api/scenes/:identifier',
  input: { identifier: s.identifier('Scene'), ...SceneUpdateInput.shape },
  // reference_image_urls are fetched from the public web
  annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  async run(args, ctx) {
    const sc = await ctx.deps.clients.assets.updateScene(
      UpdateSceneRequest.fromPartial({
        identifier: idString(args.identifier),
        presentFields: presentOf(args, Object.keys(SceneUpdateInput.shape)),
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
  operation: 'DELETE /api/scenes/:identifier',
  address: { identifier: 'Scene' },
  del: (assets, req, principal) => assets.deleteScene(req, principal),
  form: (r) => ({ deleted: r.deleted, sceneId: r.sceneId, sceneName: r.sceneName, imageCount: r.imageCount }),
});

// ---- style presets (SPEC 4.3) ----

const listStylePresets = defineTool({
  name: 'list_style_presets',
  description: 'List saved style presets (search in the name and the prompt).',
  operation: 'GET /api/style-presets',
  input: StylePresetListQuery.shape,
  annotations: { readOnlyHint: true },
  async run(args, ctx) {
    const r = await ctx.deps.clients.assets.listStylePresets(
      ListStylePresetsRequest.fromPartial({ limit: args.limit, offset: args.offset, cursor: args.cursor, search: args.search }),
      ctx.principal,
    );
    return {
      data: {
        data: r.presets.map(stylePresetForm),
        pagination: { limit: r.limit, offset: r.offset, total: r.total, nextCursor: r.nextCursor ?? null },
      },
    };
  },
});

const getStylePreset = getTool({
  name: 'get_style_preset',
  description: 'Get a saved style preset by id or name.',
  operation: 'GET /api/style-presets/:id',
  address: { identifier: 'Style preset' },
  get: (assets, req, principal) => assets.getStylePreset(req, principal),
  form: stylePresetForm,
});

const createStylePreset = defineTool({
  name: 'create_style_preset',
  description: 'Create a style preset (prompt prefix, negative prompt, system instruction, aspect ratio).',
  operation: 'POST /api/style-presets',
  input: StylePresetInput.shape,
  annotations: { readOnlyHint: false, destructiveHint: false },
  async run(args, ctx) {
    const p = await ctx.deps.clients.assets.createStylePreset(
      CreateStylePresetRequest.fromPartial({
        name: (args.name as string | null | undefined) ?? '',
        prompt: orUndef(args.prompt),
        negativePrompt: orUndef(args.negative_prompt),
        systemInstruction: orUndef(args.system_instruction),
        aspectRatio: (args.aspect_ratio as string | null | undefined) ?? undefined,
      }),
      ctx.principal,
    );
    return { data: { data: stylePresetForm(p) } };
  },
});

const updateStylePreset = defineTool({
  name: 'update_style_preset',
  description: 'Change a style preset; only given fields change (null clears prompt, negative_prompt, system_instruction, aspect_ratio).',
  operation: 'PATCH /api/style-presets/:id',
  input: { identifier: s.identifier('Style preset'), ...StylePresetUpdateInput.shape },
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
  async run(args, ctx) {
    const p = await ctx.deps.clients.assets.updateStylePreset(
      UpdateStylePresetRequest.fromPartial({
        identifier: idString(args.identifier),
        presentFields: presentOf(args, Object.keys(StylePresetUpdateInput.shape)),
        newName: (args.new_name as string | null | undefined) ?? undefined,
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
  operation: 'DELETE /api/style-presets/:id',
  address: { identifier: 'Style preset' },
  del: (assets, req, principal) => assets.deleteStylePreset(req, principal),
});

// ---- gallery search presets (SPEC 4.6) ----

const listSearchPresets = defineTool({
  name: 'list_search_presets',
  description: 'List saved gallery search presets.',
  operation: 'GET /api/search-presets',
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
  operation: 'POST /api/search-presets',
  input: SearchPresetInput.shape,
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
  operation: 'DELETE /api/search-presets/:id',
  address: { id: 'Search preset id' },
  del: (assets, req, principal) => assets.deleteSearchPreset(req, principal),
});

const runSearchPreset = defineTool({
  name: 'run_search_preset',
  description: "Run a saved search preset's filters against the image library.",
  operation: 'GET /api/search-presets/:id/images',
  // The query of GET /api/search-presets/:id/images, one definition for both (its cursor is list_images').
  input: { id: s.id('Search preset id'), ...SearchPresetImagesQuery.shape },
  annotations: { readOnlyHint: true },
  async run(args, ctx) {
    const r = await ctx.deps.clients.assets.runSearchPreset(
      RunSearchPresetRequest.fromPartial({
        identifier: String(args.id),
        limit: args.limit ?? 20,
        offset: args.offset ?? 0,
        cursor: args.cursor === '' ? undefined : args.cursor,
      }),
      ctx.principal,
    );
    return {
      data: {
        preset: r.preset ? searchPresetForm(r.preset) : null,
        data: r.images.map(imageJson),
        // As GET /api/search-presets/:id/images (its pagination, outputs.ts).
        pagination: cursorPagination(r),
      },
    };
  },
});

export const productTools = [listProducts, getProduct, createProduct, updateProduct, deleteProduct, generateProductImage];
export const sceneTools = [listScenes, getScene, createScene, updateScene, deleteScene];
export const styleTools = [listStylePresets, getStylePreset, createStylePreset, updateStylePreset, deleteStylePreset];
export const searchPresetTools = [listSearchPresets, createSearchPreset, deleteSearchPreset, runSearchPreset];
