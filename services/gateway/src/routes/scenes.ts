import { SceneUpdateBody } from '@imagegen/api-schemas';
import { sceneDetail, sceneListForm } from '@imagegen/operations';
import { badRequest } from '@imagegen/platform';
import type { FastifyRequest } from 'fastify';
import type { RouteModule } from '../types.js';
import { assetListRequest, assetPagination, str } from './asset-schemas.js';

/**
 * Scene presets (SPEC 4.5), camelCase output, snake_case bodies. A scene is also a "reference group" for
 * generation (reference_group_id(s) = scene ids, reference_group_name = scene name; docs/design/assets.md).
 * Body problems answer 400 'Invalid scene preset payload' with details, as SPEC 7 says for scenes: the bodies
 * (SceneBody, SceneUpdateBody of @imagegen/api-schemas, shown by the OpenAPI document) are checked here for their
 * JSON types and by the library service for their rules.
 */
const UPDATE_FIELDS = Object.keys(SceneUpdateBody.shape);

type Body = Record<string, unknown>;
const arr = <T>(v: unknown): T[] => (Array.isArray(v) ? (v as T[]) : []);

/** Scene bodies are validated by hand so their problems carry the scene error text of SPEC 7. */
function checkBody(request: FastifyRequest, nameField: string, required: boolean): Body {
  const b = request.body;
  if (b === null || typeof b !== 'object' || Array.isArray(b)) throw badRequest('Invalid scene preset payload', ['body must be an object']);
  const body = b as Body;
  const problems: string[] = [];
  const name = body[nameField];
  if (name === undefined || name === null) {
    if (required) problems.push(`${nameField} is required`);
  } else if (typeof name !== 'string') problems.push(`${nameField} must be a string`);
  for (const f of ['description', 'scene_prompt', 'default_reference_mode', 'preferred_aspect_ratio']) {
    if (body[f] !== undefined && body[f] !== null && typeof body[f] !== 'string') problems.push(`${f} must be a string`);
  }
  const arrays: [string, string][] = [
    ['reference_image_ids', 'integer'],
    ['reference_image_urls', 'string'],
    ['tags', 'string'],
  ];
  for (const [f, t] of arrays) {
    const v = body[f];
    if (v === undefined || v === null) continue;
    if (!Array.isArray(v)) problems.push(`${f} must be an array`);
    else if (v.some((x) => (t === 'integer' ? !Number.isSafeInteger(x) || (x as number) < 1 : typeof x !== 'string'))) {
      problems.push(`${f} must contain only ${t === 'integer' ? 'positive integers' : 'strings'}`);
    }
  }
  if (problems.length) throw badRequest('Invalid scene preset payload', problems);
  return body;
}

const scenesRoutes: RouteModule = (app, { clients }) => {
  const assets = clients.assets;

  app.get('/api/scenes', async (request) => {
    const res = await assets.listScenes(assetListRequest(request.query), request.principal);
    return {
      data: res.scenes.map(sceneListForm),
      pagination: assetPagination(res),
    };
  });

  app.get('/api/scenes/:identifier', async (request) => {
    const { identifier } = request.params as { identifier: string };
    return { data: sceneDetail(await assets.getScene({ identifier }, request.principal)) };
  });

  app.post('/api/scenes', async (request) => {
    const b = checkBody(request, 'scene_name', true);
    const s = await assets.createScene(
      {
        sceneName: b.scene_name as string,
        description: str(b.description),
        scenePrompt: str(b.scene_prompt),
        referenceImageIds: arr<number>(b.reference_image_ids),
        referenceImageUrls: arr<string>(b.reference_image_urls),
        defaultReferenceMode: str(b.default_reference_mode),
        preferredAspectRatio: str(b.preferred_aspect_ratio),
        tags: arr<string>(b.tags),
      },
      request.principal,
    );
    return { data: sceneDetail(s) };
  });

  app.patch('/api/scenes/:identifier', async (request) => {
    const { identifier } = request.params as { identifier: string };
    const b = checkBody(request, 'new_scene_name', false);
    const present = UPDATE_FIELDS.filter((k) => k in b && !(k === 'new_scene_name' && b[k] === null));
    const s = await assets.updateScene(
      {
        identifier,
        presentFields: present,
        newSceneName: str(b.new_scene_name),
        description: str(b.description),
        scenePrompt: str(b.scene_prompt),
        referenceImageIds: arr<number>(b.reference_image_ids),
        referenceImageUrls: arr<string>(b.reference_image_urls),
        defaultReferenceMode: str(b.default_reference_mode),
        preferredAspectRatio: str(b.preferred_aspect_ratio),
        tags: arr<string>(b.tags),
      },
      request.principal,
    );
    return { data: sceneDetail(s) };
  });

  app.delete('/api/scenes/:identifier', async (request) => {
    const { identifier } = request.params as { identifier: string };
    const r = await assets.deleteScene({ identifier }, request.principal);
    return { data: { deleted: true, sceneId: r.sceneId, sceneName: r.sceneName, imageCount: r.imageCount } };
  });
};

export default scenesRoutes;
