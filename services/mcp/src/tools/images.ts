import {
  DeleteImagesBody,
  EditImageBody,
  GenerateImagesBody,
  ImageListQuery,
  MAX_BULK_DELETE,
  REFERENCE_GROUPS_PER_REQUEST_MAX,
  snakeCased,
  UploadForEditingInput,
} from '@imagegen/api-schemas';
import { type GenerateImagesRequest, Int64List } from '@imagegen/contracts/generation/v1/generation';
import {
  cursorPagination,
  editImageJson,
  editImageRequest,
  GENERATE_DEADLINE_MS,
  generateImagesRequest,
  generateResultJson,
  imageCredentialsJson,
  imageDetailJson,
  imageJson,
  listImagesRequest,
  submitGenerationJob,
  UPLOAD_DEADLINE_MS,
  uploadForEditingJson,
  uploadForEditingRequest,
} from '@imagegen/operations';
import { AppError, badRequest, notFound } from '@imagegen/platform';
import { z } from 'zod';
import { defineTool, ID_MAX, s, type ToolContext } from './framework.js';
import { newSessionId, runGeneration, thumbnailsOf, thumbnailsOfGenerated } from './generation-run.js';

const MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024;

/** The REST body of POST /api/images (one definition, @imagegen/api-schemas) plus the MCP-only arguments. */
const generateInput = {
  ...GenerateImagesBody.shape,
  scene_id: z.number().int().min(1).max(ID_MAX).optional().describe('Use a saved scene (its prompt, references and aspect ratio)'),
  scene_name: z.string().min(1).optional().describe('Use a saved scene by name'),
  async: z.boolean().optional().describe('Queue it as a job and return its executionId at once; get the result with wait_for_execution'),
};

/**
 * The library reports invalid filters under the REST query names (dateFrom, resolutionTier); the tool's
 * arguments are snake_case (date_from, resolution_tier), so the details name the argument the model passed.
 */
async function libraryArgs<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof AppError && Array.isArray(err.body.details)) {
      const snake = (d: unknown) =>
        typeof d === 'string' ? d.replace(/^[a-z]+(?:[A-Z][a-z]*)+\b/, (w) => w.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)) : d;
      throw new AppError(err.status, { ...err.body, details: err.body.details.map(snake) }, err.headers);
    }
    throw err;
  }
}

type GenerateArgs = z.infer<z.ZodObject<typeof generateInput>>;

/** scene_name -> scene id (AssetsService.GetScene); a scene is a reference group for generation. */
async function sceneGroups(
  args: GenerateArgs,
  ctx: ToolContext,
): Promise<Pick<GenerateImagesRequest, 'referenceGroupId' | 'referenceGroupIds'>> {
  // Both fields, always: they replace the arguments' own (a scene joins the reference groups given with it).
  if (args.scene_id === undefined && args.scene_name === undefined) {
    return {
      referenceGroupId: args.reference_group_id,
      referenceGroupIds: args.reference_group_ids ? Int64List.fromPartial({ values: args.reference_group_ids }) : undefined,
    };
  }
  if (args.scene_id !== undefined && args.scene_name !== undefined)
    throw badRequest('Invalid request payload', ['use scene_id or scene_name, not both']);
  // A name only: a scene named "12" must not resolve to the scene whose id is 12. An id is looked up too, so an
  // unknown one answers the scene's own error ('Scene preset with ID <id> not found for this tenant').
  const scene =
    args.scene_id !== undefined
      ? await ctx.deps.clients.assets.getScene({ identifier: String(args.scene_id) }, ctx.principal)
      : await ctx.deps.clients.assets.getScene({ identifier: args.scene_name as string, byName: true }, ctx.principal);
  const sceneId = scene.id;
  const ids = [sceneId, ...(args.reference_group_id !== undefined ? [args.reference_group_id] : []), ...(args.reference_group_ids ?? [])];
  const unique = [...new Set(ids)];
  if (unique.length > REFERENCE_GROUPS_PER_REQUEST_MAX)
    throw badRequest('Invalid request payload', [`scene and reference groups: at most ${REFERENCE_GROUPS_PER_REQUEST_MAX} in total`]);
  return unique.length === 1
    ? { referenceGroupId: unique[0], referenceGroupIds: undefined }
    : { referenceGroupId: undefined, referenceGroupIds: Int64List.fromPartial({ values: unique }) };
}

const generateImage = defineTool({
  name: 'generate_image',
  description: 'Generate images from a prompt, optionally with saved characters, products, scenes, style presets and references.',
  operation: 'POST /api/images',
  input: generateInput,
  annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  async run(args, ctx) {
    const groups = await sceneGroups(args, ctx);
    const sessionId = args.session_id ?? newSessionId();
    const req: GenerateImagesRequest = { ...generateImagesRequest(args), ...groups, sessionId, toolName: 'generate_image' };
    if (args.async) {
      // A queued job (issue 37): durable, run by any generation replica; wait_for_execution gives its result.
      const job = await submitGenerationJob(
        ctx.deps.clients,
        { ...ctx.principal, sessionId },
        { operation: 'POST /api/images', generate: req, presentation: {} },
      );
      return {
        data: {
          executionId: job.executionId,
          status: job.status,
          position: job.position,
          session_id: sessionId,
          message: `Queued; call wait_for_execution with execution_id ${job.executionId} for the result, or cancel_execution to stop it`,
        },
      };
    }
    return runGeneration(ctx, {
      sessionId,
      call: async (principal, executionId) => {
        const res = await ctx.deps.clients.generating.generateImages({ ...req, executionId }, principal, {
          timeoutMs: GENERATE_DEADLINE_MS,
        });
        return {
          executionId: res.executionId,
          data: generateResultJson(res),
          images: await thumbnailsOfGenerated({ ...ctx, principal }, res.images),
        };
      },
    });
  },
});

const editImage = defineTool({
  name: 'edit_image',
  description: 'Edit a stored image with a prompt; the result is a new image whose parent is the source.',
  operation: 'POST /api/edit-image',
  input: EditImageBody.shape,
  annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  async run(args, ctx) {
    const sessionId = args.session_id ?? newSessionId();
    return runGeneration(ctx, {
      sessionId,
      call: async (principal, executionId) => {
        const res = await ctx.deps.clients.generating.editImage(
          { ...editImageRequest(args), sessionId, toolName: 'edit_image', executionId },
          principal,
          { timeoutMs: GENERATE_DEADLINE_MS },
        );
        const img = res.image!;
        return {
          executionId: res.executionId,
          data: editImageJson(res, args.image_id),
          images: await thumbnailsOfGenerated({ ...ctx, principal }, [img]),
        };
      },
    });
  },
});

const getImageInfo = defineTool({
  name: 'get_image_info',
  description: 'Get one image with its metadata and edit history.',
  operation: 'GET /api/images/:id',
  input: {
    image_id: s.id('Image id'),
    include_thumbnail: z.boolean().optional().describe('Also return the 200x200 thumbnail'),
  },
  annotations: { readOnlyHint: true },
  async run(args, ctx) {
    const d = await ctx.deps.clients.library.getImage({ imageId: args.image_id }, ctx.principal);
    return {
      data: imageDetailJson(d),
      images: args.include_thumbnail && d.image ? await thumbnailsOf(ctx, [d.image.thumbnailKey]) : [],
    };
  },
});

const listImages = defineTool({
  name: 'list_images',
  description: 'List images, newest first, with optional filters (search, dates, ratio, operation, size, session, model...).',
  operation: 'GET /api/images',
  input: snakeCased(ImageListQuery.shape),
  annotations: { readOnlyHint: true },
  async run(args, ctx) {
    const r = await libraryArgs(() => ctx.deps.clients.library.listImages(listImagesRequest(args), ctx.principal));
    return { data: { data: r.images.map(imageJson), pagination: cursorPagination(r) } };
  },
});

const deleteImage = defineTool({
  name: 'delete_image',
  description: 'Delete an image and its files (edits made from it stay).',
  operation: 'DELETE /api/images/:id',
  input: { image_id: s.id('Image id') },
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
  async run(args, ctx) {
    await ctx.deps.clients.library.deleteImage({ imageId: args.image_id }, ctx.principal);
    return { data: { deleted: true, id: args.image_id } };
  },
});

const deleteImages = defineTool({
  name: 'delete_images',
  description: `Delete up to ${MAX_BULK_DELETE} images at once; reports which were deleted and which failed.`,
  operation: 'POST /api/images/delete-bulk',
  input: { image_ids: DeleteImagesBody.shape.ids },
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
  async run(args, ctx) {
    // As POST /api/images/delete-bulk: a repeated id counts once.
    const ids = [...new Set(args.image_ids)];
    const r = await ctx.deps.clients.library.deleteImages({ imageIds: ids }, ctx.principal);
    return {
      data: {
        deleted: r.deleted,
        failed: r.failed.map((f) => ({ id: f.id, error: f.error })),
        summary: { total: ids.length, succeeded: r.deleted.length, failed: r.failed.length },
      },
    };
  },
});

const uploadImageForEditing = defineTool({
  name: 'upload_image_for_editing',
  description: 'Fetch an image from a public URL into the library so it can be edited.',
  operation: 'POST /api/upload-for-editing',
  input: UploadForEditingInput.shape,
  annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  async run(args, ctx) {
    const res = await ctx.deps.clients.generating.uploadForEditing(
      { ...uploadForEditingRequest(args), toolName: 'upload_image_for_editing' },
      ctx.principal,
      { timeoutMs: UPLOAD_DEADLINE_MS },
    );
    let thumbKey = '';
    try {
      thumbKey = (await ctx.deps.clients.library.getImage({ imageId: res.imageId }, ctx.principal)).image?.thumbnailKey ?? '';
    } catch {}
    return {
      data: uploadForEditingJson(res),
      images: await thumbnailsOf(ctx, [thumbKey]),
    };
  },
});

const downloadImages = defineTool({
  name: 'download_images',
  description: 'Download up to 10 images as image content (originals, or thumbnails with thumbnails=true).',
  operation: 'POST /api/images/download',
  input: {
    image_ids: z.array(z.number().int().min(1).max(ID_MAX)).min(1).max(10).describe('Image ids (1-10)'),
    thumbnails: z.boolean().optional().describe('Return 200x200 thumbnails instead of the originals'),
  },
  annotations: { readOnlyHint: true },
  async run(args, ctx) {
    const ids = [...new Set(args.image_ids)];
    const resolved = await ctx.deps.clients.library.resolveImages({ imageIds: ids }, ctx.principal);
    if (resolved.missingIds.length) throw new AppError(404, { error: 'Image not found', details: { missing_ids: resolved.missingIds } });
    const total = resolved.images.reduce((n, i) => n + (args.thumbnails ? i.thumbnailSizeBytes : i.sizeBytes), 0);
    if (total > MAX_DOWNLOAD_BYTES) {
      throw badRequest('Requested images are too large to return at once (20 MB)', {
        total_bytes: total,
        hint: 'ask for fewer images or use fullUrl',
      });
    }
    const images = args.thumbnails
      ? await thumbnailsOf(
          ctx,
          resolved.images.map((i) => i.thumbnailKey),
        )
      : await Promise.all(
          resolved.images.map(async (i) => {
            const d = await ctx.deps.clients.library.getImageData({ imageId: i.id }, ctx.principal);
            if (!d.image) throw notFound('Image not found');
            return { data: Buffer.from(d.data), mimeType: d.mimeType || i.mimeType };
          }),
        );
    return {
      data: {
        images: resolved.images.map((i) => ({
          id: i.id,
          fullUrl: i.fullUrl,
          thumbnailUrl: i.thumbnailUrl,
          mimeType: args.thumbnails ? i.thumbnailMimeType || 'image/png' : i.mimeType,
          sizeBytes: args.thumbnails ? i.thumbnailSizeBytes : i.sizeBytes,
        })),
      },
      images,
    };
  },
});

// (extension, issue 39) The same answer as GET /api/images/:id/credentials.
const getImageCredentials = defineTool({
  name: 'get_image_credentials',
  description: "Get an image's Content Credentials (C2PA manifest store: who signed it, how it was made, its edit chain), validated.",
  operation: 'GET /api/images/:id/credentials',
  input: { image_id: s.id('Image id') },
  annotations: { readOnlyHint: true },
  async run(args, ctx) {
    return { data: imageCredentialsJson(await ctx.deps.clients.library.getImageCredentials({ imageId: args.image_id }, ctx.principal)) };
  },
});

/** The extensions of issue 39 (after the spec's tools in tools/list). */
export const imageCredentialTools = [getImageCredentials];

export const imageTools = [
  generateImage,
  editImage,
  getImageInfo,
  listImages,
  deleteImage,
  deleteImages,
  uploadImageForEditing,
  downloadImages,
];
