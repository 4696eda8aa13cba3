import { type Infer, type ProductBody, type ProductGenerateBody, type ProductListQuery, ProductUpdateBody } from '@imagegen/api-schemas';
import { productCreatedJson, productDetail, productListForm, productUpdateJson, scenePromptWithDetails } from '@imagegen/operations';
import { invalidPayload } from '@imagegen/platform';
import { answerGeneration } from '../generation-answer.js';
import type { RouteModule } from '../types.js';
import { str } from './asset-schemas.js';

/**
 * Products (SPEC 4.4), camelCase output, snake_case bodies. Create fetches product_url server-side
 * (SSRF-guarded) and stores the image and its thumbnail. `:identifier` is the id or the URL-encoded name.
 */
const UPDATE_FIELDS = Object.keys(ProductUpdateBody.shape);

const productsRoutes: RouteModule = (app, { clients }) => {
  const assets = clients.assets;

  app.get('/api/products', async (request) => {
    const q = request.query as Infer<typeof ProductListQuery>;
    const res = await assets.listProducts({ page: q.page, pageSize: q.page_size, search: q.search, cursor: q.cursor }, request.principal);
    return {
      data: res.products.map(productListForm),
      pagination: { page: res.page, pageSize: res.pageSize, total: res.total, hasMore: res.hasMore, nextCursor: res.nextCursor ?? null },
    };
  });

  app.get('/api/products/:identifier', async (request) => {
    const { identifier } = request.params as { identifier: string };
    return { data: productDetail(await assets.getProduct({ identifier }, request.principal)) };
  });

  app.post('/api/products', async (request) => {
    const b = request.body as Infer<typeof ProductBody>;
    const p = await assets.createProduct(
      {
        productName: b.product_name,
        productUrl: b.product_url,
        productDescription: str(b.product_description),
        tags: str(b.tags),
      },
      request.principal,
    );
    return { data: productCreatedJson(p) };
  });

  app.patch('/api/products/:identifier', async (request) => {
    const { identifier } = request.params as { identifier: string };
    const b = (request.body ?? {}) as Infer<typeof ProductUpdateBody>;
    const p = await assets.updateProduct(
      {
        identifier,
        presentFields: UPDATE_FIELDS.filter((k) => k in b),
        productName: b.product_name,
        productDescription: str(b.product_description),
        tags: str(b.tags),
      },
      request.principal,
    );
    return { data: productUpdateJson(p) };
  });

  app.delete('/api/products/:identifier', async (request) => {
    const { identifier } = request.params as { identifier: string };
    await assets.deleteProduct({ identifier }, request.principal);
    return { data: { deleted: true } };
  });

  app.post('/api/products/:identifier/generate', async (request, reply) => {
    const { identifier } = request.params as { identifier: string };
    const b = request.body as Infer<typeof ProductGenerateBody>;
    if (b.scene_prompt.trim() === '') throw invalidPayload(['scene_prompt cannot be empty']);
    const product = await assets.getProduct({ identifier }, request.principal);
    return answerGeneration(request, reply, clients, {
      operation: 'POST /api/products/:identifier/generate',
      generate: {
        prompt: scenePromptWithDetails(b.scene_prompt, b.additional_details),
        productId: product.id,
        aspectRatio: b.aspect_ratio,
        negativePrompt: str(b.negative_prompt),
        n: b.number_of_images,
        sessionId: b.session_id,
        toolName: 'generate_product_image',
      },
      presentation: { productId: product.id, productName: product.productName, scenePrompt: b.scene_prompt },
    });
  });
};

export default productsRoutes;
