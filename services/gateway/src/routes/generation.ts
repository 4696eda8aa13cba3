import {
  editImageRequest,
  generateImagesRequest,
  UPLOAD_DEADLINE_MS,
  uploadForEditingJson,
  uploadForEditingRequest,
} from '@imagegen/operations';
import type { FastifyInstance } from 'fastify';
import { answerGeneration } from '../generation-answer.js';
import type { RouteModule } from '../types.js';

/**
 * Generation (SPEC 4.1): POST /api/images, POST /api/edit-image, POST /api/upload-for-editing. The first two answer
 * 202 with a queued job when asked `Prefer: respond-async` (generation-answer.ts).
 * The bodies' JSON types only are checked before these handlers (null counts as absent: `validate: 'types'` in the
 * operation catalogue); every rule of the spec (limits, enums, per-model options, allowlist) is checked by the
 * generation service so that one 400 'Invalid request payload' lists every problem at once, for REST and MCP alike.
 */

type Body = Record<string, unknown>;

const generationRoutes: RouteModule = (app: FastifyInstance, { clients }) => {
  const waited = clients.generating;

  app.post('/api/images', (req, reply) =>
    answerGeneration(req, reply, clients, {
      operation: 'POST /api/images',
      generate: generateImagesRequest((req.body ?? {}) as Body),
      presentation: {},
    }),
  );

  app.post('/api/edit-image', (req, reply) => {
    const b = (req.body ?? {}) as Body;
    return answerGeneration(req, reply, clients, {
      operation: 'POST /api/edit-image',
      edit: editImageRequest(b),
      presentation: { imageId: b.image_id as number },
    });
  });

  app.post('/api/upload-for-editing', async (req) => {
    const b = (req.body ?? {}) as Body;
    const r = await waited.uploadForEditing(uploadForEditingRequest(b), req.principal, { timeoutMs: UPLOAD_DEADLINE_MS });
    return uploadForEditingJson(r);
  });
};

export default generationRoutes;
