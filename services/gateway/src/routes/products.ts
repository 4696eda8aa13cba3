import { GenerationServiceService } from '@imagegen/contracts/generation/v1/generation';
import { AssetsServiceService } from '@imagegen/contracts/library/v1/assets';
import {
  createClient,
  invalidPayload,
  productCreatedJson,
  productDetail,
  productImagesJson,
  productListForm,
  productUpdateJson,
} from '@imagegen/platform';
import type { RouteModule } from '../app.js';
import { INT32_MAX } from '../validation.js';
import { identifierParams, nullable, str } from './asset-schemas.js';

/**
 * Products (SPEC 4.4), camelCase output, snake_case bodies. Create fetches product_url server-side
 * (SSRF-guarded) and stores the image and its thumbnail. `:identifier` is the id or the URL-encoded name.
 */
const TAGS = ['Products'];

const productsRoutes: RouteModule = (app, { ctx }) => {
  const assets = createClient(AssetsServiceService, () => ctx.resolve('library'));
  const generation = createClient(GenerationServiceService, () => ctx.resolve('generation'));
  app.addHook('onClose', async () => {
    assets.close();
    generation.close();
  });

  app.get(
    '/api/products',
    {
      schema: {
        tags: TAGS,
        summary: 'List products (page/page_size)',
        querystring: {
          type: 'object',
          properties: {
            page: { type: 'integer', minimum: 1, maximum: INT32_MAX, default: 1 },
            page_size: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
            search: { type: 'string', maxLength: 200, description: 'matches name, description and tags' },
          },
        },
      },
    },
    async (request) => {
      const q = request.query as { page: number; page_size: number; search?: string };
      const res = await assets.listProducts({ page: q.page, pageSize: q.page_size, search: q.search }, request.principal);
      return {
        data: res.products.map(productListForm),
        pagination: { page: res.page, pageSize: res.pageSize, total: res.total, hasMore: res.hasMore },
      };
    },
  );

  app.get(
    '/api/products/:identifier',
    { schema: { tags: TAGS, summary: 'Get a product by id or name', params: identifierParams } },
    async (request) => {
      const { identifier } = request.params as { identifier: string };
      return { data: productDetail(await assets.getProduct({ identifier }, request.principal)) };
    },
  );

  app.post(
    '/api/products',
    {
      schema: {
        tags: TAGS,
        summary: 'Create a product from a public image URL',
        body: {
          type: 'object',
          required: ['product_name', 'product_url'],
          properties: {
            product_name: { type: 'string', minLength: 1, maxLength: 100 },
            product_url: { type: 'string', description: 'public HTTP or HTTPS image URL' },
            product_description: nullable('string', { maxLength: 500 }),
            tags: nullable('string', { description: 'comma-separated, each tag at most 50 characters' }),
          },
        },
      },
    },
    async (request) => {
      const b = request.body as Record<string, unknown>;
      const p = await assets.createProduct(
        {
          productName: b.product_name as string,
          productUrl: b.product_url as string,
          productDescription: str(b.product_description),
          tags: str(b.tags),
        },
        request.principal,
      );
      return { data: productCreatedJson(p) };
    },
  );

  app.patch(
    '/api/products/:identifier',
    {
      schema: {
        tags: TAGS,
        summary: 'Update a product',
        params: identifierParams,
        body: {
          type: 'object',
          properties: {
            product_name: { type: 'string', minLength: 1, maxLength: 100 },
            product_description: nullable('string', { maxLength: 500 }),
            tags: nullable('string'),
          },
        },
      },
    },
    async (request) => {
      const { identifier } = request.params as { identifier: string };
      const b = (request.body ?? {}) as Record<string, unknown>;
      const present = ['product_name', 'product_description', 'tags'].filter((k) => k in b);
      const p = await assets.updateProduct(
        {
          identifier,
          presentFields: present,
          productName: str(b.product_name),
          productDescription: str(b.product_description),
          tags: str(b.tags),
        },
        request.principal,
      );
      return { data: productUpdateJson(p) };
    },
  );

  app.delete(
    '/api/products/:identifier',
    { schema: { tags: TAGS, summary: 'Delete a product and its stored image (generated images stay)', params: identifierParams } },
    async (request) => {
      const { identifier } = request.params as { identifier: string };
      await assets.deleteProduct({ identifier }, request.principal);
      return { data: { deleted: true } };
    },
  );

  app.post(
    '/api/products/:identifier/generate',
    {
      schema: {
        tags: TAGS,
        summary: 'Generate 1-4 images featuring a product',
        params: identifierParams,
        body: {
          type: 'object',
          required: ['scene_prompt'],
          properties: {
            scene_prompt: { type: 'string', minLength: 1, maxLength: 1500 },
            additional_details: nullable('string', { maxLength: 500 }),
            aspect_ratio: { type: 'string', enum: ['1:1', '16:9', '9:16', '4:3', '3:4'] },
            negative_prompt: nullable('string', { maxLength: 1024 }),
            number_of_images: { type: 'integer', minimum: 1, maximum: 4, default: 1 },
            session_id: { type: 'string', minLength: 1, maxLength: 200 },
          },
        },
      },
    },
    async (request) => {
      const { identifier } = request.params as { identifier: string };
      const b = request.body as {
        scene_prompt: string;
        additional_details?: string | null;
        aspect_ratio?: string;
        negative_prompt?: string | null;
        number_of_images: number;
        session_id?: string;
      };
      if (b.scene_prompt.trim() === '') throw invalidPayload(['scene_prompt cannot be empty']);
      const product = await assets.getProduct({ identifier }, request.principal);
      const details = typeof b.additional_details === 'string' ? b.additional_details.trim() : '';
      const res = await generation.generateImages(
        {
          prompt: details ? `${b.scene_prompt.trim()}\n\nAdditional details: ${details}` : b.scene_prompt.trim(),
          productId: product.id,
          aspectRatio: b.aspect_ratio,
          negativePrompt: typeof b.negative_prompt === 'string' ? b.negative_prompt : undefined,
          n: b.number_of_images,
          sessionId: b.session_id,
          toolName: 'generate_product_image',
        },
        request.principal,
      );
      return { data: productImagesJson(res, product, b.scene_prompt) };
    },
  );
};

export default productsRoutes;
