import { EditImageBody, GenerateImagesBody, typesOnly, UploadForEditingBody } from '@imagegen/api-schemas';
import {
  editImageJson,
  editImageRequest,
  GENERATE_DEADLINE_MS,
  generateImagesRequest,
  generateResultJson,
  UPLOAD_DEADLINE_MS,
  uploadForEditingJson,
  uploadForEditingRequest,
} from '@imagegen/operations';
import type { FastifyInstance } from 'fastify';
import type { RouteModule } from '../types.js';

/**
 * Generation (SPEC 4.1): POST /api/images, POST /api/edit-image, POST /api/upload-for-editing.
 * The JSON schemas check types only (null counts as absent); every rule of the spec (limits, enums,
 * per-model options, allowlist) is checked by the generation service so that one 400 'Invalid
 * request payload' lists every problem at once, for REST and MCP alike.
 */

// The bodies are defined once in @imagegen/api-schemas; the routes validate their JSON types only (null counts
// as absent) and the generation service checks every rule, so one 400 lists every problem (REST and MCP alike).
// Ids keep their int64 wire bounds; counts are clamped to int32 by the mapping (libs/operations requests.ts).
export const generateBodySchema = typesOnly(GenerateImagesBody);

type Body = Record<string, unknown>;

const generationRoutes: RouteModule = (app: FastifyInstance, { clients }) => {
  const waited = clients.generating;

  app.post(
    '/api/images',
    {
      schema: {
        summary: 'Generate images from a prompt (or edit one with image_to_edit_id)',
        description:
          'Returns {data:{images, metadata:{requested, generated, session_id}, executionId}}. Provider safety blocks answer 400 ' +
          "'Content blocked by provider safety filters: <reason>'; an open provider circuit answers 503; 402 when the monthly quota is used up.",
        body: generateBodySchema,
      },
    },
    async (req) => {
      const r = await waited.generateImages(generateImagesRequest((req.body ?? {}) as Body), req.principal, {
        timeoutMs: GENERATE_DEADLINE_MS,
      });
      return { data: generateResultJson(r) };
    },
  );

  app.post(
    '/api/edit-image',
    {
      schema: {
        summary: 'Edit a stored image with a prompt; the result keeps the source shape unless aspect_ratio is given',
        body: typesOnly(EditImageBody),
      },
    },
    async (req) => {
      const b = (req.body ?? {}) as Body;
      const r = await waited.editImage(editImageRequest(b), req.principal, { timeoutMs: GENERATE_DEADLINE_MS });
      return editImageJson(r, b.image_id as number);
    },
  );

  app.post(
    '/api/upload-for-editing',
    {
      schema: {
        summary: 'Fetch a public image URL into the library so it can be edited',
        description:
          'PNG, JPEG, WebP or single-frame GIF; at most 20 MB and 4,194,304 pixels. Private, loopback, link-local and metadata ' +
          'addresses are refused (also after redirects and DNS resolution).',
        body: typesOnly(UploadForEditingBody),
      },
    },
    async (req) => {
      const b = (req.body ?? {}) as Body;
      const r = await waited.uploadForEditing(uploadForEditingRequest(b), req.principal, { timeoutMs: UPLOAD_DEADLINE_MS });
      return uploadForEditingJson(r);
    },
  );
};

export default generationRoutes;
