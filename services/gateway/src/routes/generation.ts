import { EditImageBody, GenerateImagesBody, typesOnly, UploadForEditingBody } from '@imagegen/api-schemas';
import { type GenerateImagesRequest, GenerationServiceService } from '@imagegen/contracts/generation/v1/generation';
import {
  type Client,
  createClient,
  editImageJson,
  GENERATE_DEADLINE_MS,
  type GenerationCalls,
  generatedImageJson,
  generationCalls,
  type ServiceContext,
  UPLOAD_DEADLINE_MS,
  uploadForEditingJson,
} from '@imagegen/platform';
import type { FastifyInstance } from 'fastify';
import type { RouteModule } from '../app.js';
import { INT32_MAX, INT32_MIN } from '../validation.js';
import { libraryClient } from './images.js';

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

const calls = new WeakMap<ServiceContext, GenerationCalls>();

/**
 * GenerateImages, EditImage and UploadForEditing for every route that waits for them (generate, edit, upload,
 * characters, products): each call names its execution, and an answer lost with its generation replica is rebuilt
 * from that execution when it completed (libs/platform generation-calls.ts).
 */
export function generationCallsOf(ctx: ServiceContext): GenerationCalls {
  let c = calls.get(ctx);
  if (!c) {
    c = generationCalls({ generation: generationClient(ctx), library: libraryClient(ctx), logger: ctx.logger });
    calls.set(ctx, c);
  }
  return c;
}

// The bodies are defined once in @imagegen/api-schemas; the routes validate their JSON types only (null counts
// as absent) and the generation service checks every rule, so one 400 lists every problem (REST and MCP alike).
// Ids keep their int64 wire bounds; counts are clamped to int32 below so the service reports them with its own text.
export const generateBodySchema = typesOnly(GenerateImagesBody);

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

const generationRoutes: RouteModule = (app: FastifyInstance, { ctx }) => {
  const waited = generationCallsOf(ctx);

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
      const r = await waited.generateImages(toGenerateRequest((req.body ?? {}) as Body), req.principal, {
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
        body: typesOnly(EditImageBody),
      },
    },
    async (req) => {
      const b = (req.body ?? {}) as Body;
      const r = await waited.editImage(
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
        body: typesOnly(UploadForEditingBody),
      },
    },
    async (req) => {
      const b = (req.body ?? {}) as Body;
      const r = await waited.uploadForEditing(
        { imageUrl: v(b.image_url), fileName: v(b.file_name), mimeType: v(b.mime_type), sessionId: v(b.session_id) },
        req.principal,
        { timeoutMs: UPLOAD_DEADLINE_MS },
      );
      return uploadForEditingJson(r);
    },
  );
};

export default generationRoutes;
