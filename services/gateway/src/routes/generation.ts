import { type GeneratedImage, type GenerateImagesRequest, GenerationServiceService } from '@imagegen/contracts/generation/v1/generation';
import { type Client, createClient, editImageJson, type ServiceContext, uploadForEditingJson } from '@imagegen/platform';
import type { FastifyInstance } from 'fastify';
import type { RouteModule } from '../app.js';
import { ID_MAX, INT32_MAX, INT32_MIN } from '../validation.js';

/**
 * Generation (SPEC 4.1): POST /api/images, POST /api/edit-image, POST /api/upload-for-editing.
 * The JSON schemas check types only (null counts as absent); every rule of the spec (limits, enums,
 * per-model options, allowlist) is checked by the generation service so that one 400 'Invalid
 * request payload' lists every problem at once, for REST and MCP alike.
 */

type GenerationClient = Client<typeof GenerationServiceService>;
const clients = new WeakMap<ServiceContext, GenerationClient>();

/** One generation client per gateway context (shared with routes/executions.ts). */
export function generationClient(ctx: ServiceContext): GenerationClient {
  let c = clients.get(ctx);
  if (!c) {
    c = createClient(GenerationServiceService, () => ctx.resolve('generation'));
    clients.set(ctx, c);
  }
  return c;
}

/** Generation waits for the provider (provB up to 240 s per call) and the library. */
export const GENERATE_DEADLINE_MS = 330_000;
const UPLOAD_DEADLINE_MS = 90_000;

// nullable: a JSON null counts as an absent field (ajv reports type errors as 'x must be a string').
const str = (description?: string) => ({ type: 'string', nullable: true, ...(description ? { description } : {}) });
/**
 * Integers travel as int32 (counts) or int64 (ids, read back as safe integers) over gRPC; a value outside
 * those ranges cannot be encoded (it would answer 500). Ids are bounded by the schema; counts are clamped
 * to int32 by the mapping below so the generation service reports them with its own rule text.
 */
const ID_BOUNDS = { minimum: -ID_MAX, maximum: ID_MAX } as const;
const int = (description?: string) => ({ type: 'integer', nullable: true, ...(description ? { description } : {}) });
const id = (description?: string) => ({ ...int(description), ...ID_BOUNDS });
const bool = (description?: string) => ({ type: 'boolean', nullable: true, ...(description ? { description } : {}) });
const arr = (items: 'string' | 'id', description?: string) => ({
  type: 'array',
  nullable: true,
  items: items === 'id' ? { type: 'integer', ...ID_BOUNDS } : { type: items },
  ...(description ? { description } : {}),
});

export const generateBodySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    prompt: str('Required. At most 16384 characters for provA models, 32000 for provB models.'),
    negative_prompt: str('At most 1024 characters.'),
    aspect_ratio: str('square (1:1), portrait (3:4), landscape (4:3), or 1:1, 2:3, 3:2, 3:4, 4:3, 4:5, 5:4, 9:16, 16:9, 21:9.'),
    n: int('Images to generate, 1-4 (default 1).'),
    model_id: str("Default: the tenant's model (else provA-flash-lite-image); must be in the tenant's allowlist."),
    resolution_tier: str('provA only: 0.5k, 1k, 2k, 4k. provA-flash-lite-image is fixed at 1k.'),
    use_provA_search: bool('Web search grounding (provA-flash-image, provA-pro-image).'),
    enable_thinking: bool('provA models only.'),
    size: str('provB only: auto or WIDTHxHEIGHT (multiples of 16, max edge 3840, ratio <= 3:1, 655,360-8,294,400 pixels).'),
    output_format: str('provB only: png (default), jpeg, webp.'),
    quality: str('provB only: low, medium, high, auto; xhigh and max on the 2.5 models.'),
    output_compression: int('provB only, with jpeg or webp: 0-100.'),
    background: str('provB only: auto (default), opaque; transparent on the 2.5 models with png or webp.'),
    moderation: str('provB only: auto (default), low.'),
    system_instruction: str('Style guidance for the model (at most 4000 characters).'),
    style_preset_id: id('Apply a saved style preset (by id).'),
    style_preset_name: str('Apply a saved style preset (by name).'),
    reference_images: arr('string', 'Extra reference images: storage keys of this tenant.'),
    reference_group_id: id('Saved reference group (scene id).'),
    reference_group_ids: arr('id', '1-5 saved reference groups (scene ids).'),
    reference_group_name: str('Saved reference group (scene name).'),
    reference_mode: str('style or add.'),
    session_id: str('1-200 characters; else X-Session-Id; else a new session.'),
    character_id: id('Saved character; not with character_ids.'),
    character_ids: arr('id', '1-5 saved characters; not with character_id.'),
    product_id: id('Saved product; not with product_ids.'),
    product_ids: arr('id', '1-6 saved products; not with product_id.'),
    image_to_edit_id: id('Edit this image of the library instead of generating from scratch.'),
  },
} as const;

type Body = Record<string, unknown>;
const v = <T>(x: unknown): T | undefined => (x === null || x === undefined ? undefined : (x as T));
const list = <T>(x: unknown): { values: T[] } | undefined => (Array.isArray(x) ? { values: x as T[] } : undefined);
/** An int32 field: clamped to the int32 range (still outside every rule), so it can be encoded. */
const i32 = (x: unknown): number | undefined => {
  const n = v<number>(x);
  return n === undefined ? undefined : Math.min(INT32_MAX, Math.max(INT32_MIN, n));
};

export function toGenerateRequest(b: Body): GenerateImagesRequest {
  return {
    prompt: v(b.prompt),
    negativePrompt: v(b.negative_prompt),
    aspectRatio: v(b.aspect_ratio),
    n: i32(b.n),
    modelId: v(b.model_id),
    resolutionTier: v(b.resolution_tier),
    useProvaSearch: v(b.use_provA_search),
    enableThinking: v(b.enable_thinking),
    size: v(b.size),
    outputFormat: v(b.output_format),
    quality: v(b.quality),
    outputCompression: i32(b.output_compression),
    background: v(b.background),
    moderation: v(b.moderation),
    systemInstruction: v(b.system_instruction),
    stylePresetId: v(b.style_preset_id),
    stylePresetName: v(b.style_preset_name),
    referenceImages: list<string>(b.reference_images),
    referenceGroupId: v(b.reference_group_id),
    referenceGroupIds: list<number>(b.reference_group_ids),
    referenceGroupName: v(b.reference_group_name),
    referenceMode: v(b.reference_mode),
    sessionId: v(b.session_id),
    characterId: v(b.character_id),
    characterIds: list<number>(b.character_ids),
    productId: v(b.product_id),
    productIds: list<number>(b.product_ids),
    imageToEditId: v(b.image_to_edit_id),
  };
}

/** SPEC 2 "Generated image" (snake_case), plus a few fields useful to clients. */
export function generatedImageJson(i: GeneratedImage) {
  return {
    record_id: i.recordId,
    full_url: i.fullUrl,
    thumbnail_url: i.thumbnailUrl,
    width: i.width,
    height: i.height,
    size_bytes: i.sizeBytes,
    format: i.format,
    prompt: i.prompt,
    negative_prompt: i.negativePrompt ?? null,
    has_synthid: i.hasSynthid,
    created_at: i.createdAt,
    mime_type: i.mimeType,
    aspect_ratio: i.aspectRatio,
    model_id: i.modelId,
    resolution_tier: i.resolutionTier,
    parent_image_id: i.parentImageId ?? null,
  };
}

const generationRoutes: RouteModule = (app: FastifyInstance, { ctx }) => {
  const generation = generationClient(ctx);

  app.post(
    '/api/images',
    {
      schema: {
        tags: ['Images'],
        summary: 'Generate images from a prompt (or edit one with image_to_edit_id)',
        description:
          'Returns {data:{images, metadata:{requested, generated, session_id}, executionId}}. Provider safety blocks answer 400 ' +
          "'Content blocked by provider safety filters: <reason>'; an open provider circuit answers 503; 402 when the monthly quota is used up.",
        body: generateBodySchema,
      },
    },
    async (req) => {
      const r = await generation.generateImages(toGenerateRequest((req.body ?? {}) as Body), req.principal, {
        timeoutMs: GENERATE_DEADLINE_MS,
      });
      return {
        data: {
          images: r.images.map(generatedImageJson),
          metadata: { requested: r.requested, generated: r.generated, session_id: r.sessionId },
          executionId: r.executionId,
        },
      };
    },
  );

  app.post(
    '/api/edit-image',
    {
      schema: {
        tags: ['Images'],
        summary: 'Edit a stored image with a prompt; the result keeps the source shape unless aspect_ratio is given',
        body: {
          type: 'object',
          additionalProperties: false,
          properties: {
            image_id: id('Required: the image to edit (one of this tenant).'),
            prompt: str('Required: what to change.'),
            negative_prompt: str('At most 1024 characters.'),
            aspect_ratio: str('Default: the source image shape.'),
            model_id: str("Default: the tenant's model."),
            session_id: str('1-200 characters; else X-Session-Id; else a new session.'),
          },
        },
      },
    },
    async (req) => {
      const b = (req.body ?? {}) as Body;
      const r = await generation.editImage(
        {
          imageId: v(b.image_id),
          prompt: v(b.prompt),
          negativePrompt: v(b.negative_prompt),
          aspectRatio: v(b.aspect_ratio),
          modelId: v(b.model_id),
          sessionId: v(b.session_id),
        },
        req.principal,
        { timeoutMs: GENERATE_DEADLINE_MS },
      );
      return editImageJson(r, b.image_id as number);
    },
  );

  app.post(
    '/api/upload-for-editing',
    {
      schema: {
        tags: ['Images'],
        summary: 'Fetch a public image URL into the library so it can be edited',
        description:
          'PNG, JPEG, WebP or single-frame GIF; at most 20 MB and 4,194,304 pixels. Private, loopback, link-local and metadata ' +
          'addresses are refused (also after redirects and DNS resolution).',
        body: {
          type: 'object',
          additionalProperties: false,
          properties: {
            image_url: str('Required: a public http(s) URL.'),
            file_name: str('Optional name recorded with the image.'),
            mime_type: str('Optional: image/png, image/jpeg, image/webp or image/gif (the stored type is detected).'),
            session_id: str('1-200 characters; else X-Session-Id; else a new session.'),
          },
        },
      },
    },
    async (req) => {
      const b = (req.body ?? {}) as Body;
      const r = await generation.uploadForEditing(
        { imageUrl: v(b.image_url), fileName: v(b.file_name), mimeType: v(b.mime_type), sessionId: v(b.session_id) },
        req.principal,
        { timeoutMs: UPLOAD_DEADLINE_MS },
      );
      return uploadForEditingJson(r);
    },
  );
};

export default generationRoutes;
