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
 * The bodies' JSON types only are checked before these handlers (null counts as absent: `validate: 'types'` in the
 * operation catalogue); every rule of the spec (limits, enums, per-model options, allowlist) is checked by the
 * generation service so that one 400 'Invalid request payload' lists every problem at once, for REST and MCP alike.
 */

type Body = Record<string, unknown>;

const generationRoutes: RouteModule = (app: FastifyInstance, { clients }) => {
  const waited = clients.generating;

  app.post('/api/images', async (req) => {
    const r = await waited.generateImages(generateImagesRequest((req.body ?? {}) as Body), req.principal, {
      timeoutMs: GENERATE_DEADLINE_MS,
    });
    return { data: generateResultJson(r) };
  });

  app.post('/api/edit-image', async (req) => {
    const b = (req.body ?? {}) as Body;
    const r = await waited.editImage(editImageRequest(b), req.principal, { timeoutMs: GENERATE_DEADLINE_MS });
    return editImageJson(r, b.image_id as number);
  });

  app.post('/api/upload-for-editing', async (req) => {
    const b = (req.body ?? {}) as Body;
    const r = await waited.uploadForEditing(uploadForEditingRequest(b), req.principal, { timeoutMs: UPLOAD_DEADLINE_MS });
    return uploadForEditingJson(r);
  });
};

export default generationRoutes;
