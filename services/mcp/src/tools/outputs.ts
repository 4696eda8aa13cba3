import { OPERATIONS } from '@imagegen/api-schemas';
import * as R from '@imagegen/api-schemas/resources.ts';
import { z } from 'zod';

/**
 * The result of each MCP tool (its structuredContent when it succeeds), published as the tool's outputSchema:
 * the answer of its REST twin, taken from the operation catalogue of @imagegen/api-schemas, so the REST and MCP
 * forms of a resource cannot drift apart; the few answers only MCP gives are resource shapes of
 * @imagegen/api-schemas too. The SDK server checks every successful result against its schema, the SDK client
 * (after tools/list) as well. Error results carry no structuredContent (see toolError in framework.ts).
 */

/** The success schema of a REST operation ("METHOD /path"). */
function rest(key: string): z.AnyZodObject {
  const schema = OPERATIONS[key]?.ok.schema;
  if (!schema) throw new Error(`no REST answer schema for ${key}`);
  return schema as z.AnyZodObject;
}

/** A generation tool's REST answer plus the executionId MCP adds. */
const withExecution = (key: string) => rest(key).extend({ executionId: z.string() });
/** The `data` of a REST answer `{data: T}` (tools that answer T itself). */
const restData = (key: string) => rest(key).shape.data as z.AnyZodObject;

/**
 * generate_image answers the images (POST /api/images's data) or, with async: true, the started run: an MCP
 * outputSchema is one object schema, so the fields of each form are optional there (executionId is in both).
 */
const generateImage = R.GenerateResult.partial({ images: true, metadata: true }).merge(
  R.GenerationStarted.partial({ status: true, position: true, session_id: true, message: true }),
);

export const TOOL_OUTPUTS: Record<string, z.AnyZodObject> = {
  generate_image: generateImage,
  edit_image: rest('POST /api/edit-image'),
  get_image_info: restData('GET /api/images/:id'),
  get_image_credentials: restData('GET /api/images/:id/credentials'),
  list_images: rest('GET /api/images'),
  delete_image: R.ImageDeleted,
  delete_images: restData('POST /api/images/delete-bulk'),
  upload_image_for_editing: rest('POST /api/upload-for-editing'),
  download_images: R.DownloadedImages,

  list_characters: rest('GET /api/characters'),
  get_character: rest('GET /api/characters/:identifier'),
  create_character: rest('POST /api/characters'),
  update_character: rest('PATCH /api/characters/:identifier'),
  delete_character: rest('DELETE /api/characters/:identifier'),
  generate_character_image: withExecution('POST /api/characters/:identifier/generate'),
  generate_multi_character_image: withExecution('POST /api/characters/generate-multi'),

  list_products: rest('GET /api/products'),
  get_product: rest('GET /api/products/:identifier'),
  create_product: rest('POST /api/products'),
  update_product: rest('PATCH /api/products/:identifier'),
  delete_product: rest('DELETE /api/products/:identifier'),
  generate_product_image: withExecution('POST /api/products/:identifier/generate'),

  list_scenes: rest('GET /api/scenes'),
  get_scene: rest('GET /api/scenes/:identifier'),
  create_scene: rest('POST /api/scenes'),
  update_scene: rest('PATCH /api/scenes/:identifier'),
  delete_scene: rest('DELETE /api/scenes/:identifier'),

  list_style_presets: rest('GET /api/style-presets'),
  get_style_preset: rest('GET /api/style-presets/:id'),
  create_style_preset: rest('POST /api/style-presets'),
  update_style_preset: rest('PATCH /api/style-presets/:id'),
  delete_style_preset: rest('DELETE /api/style-presets/:id'),

  list_search_presets: rest('GET /api/search-presets'),
  create_search_preset: rest('POST /api/search-presets'),
  delete_search_preset: rest('DELETE /api/search-presets/:id'),
  run_search_preset: rest('GET /api/search-presets/:id/images'),

  list_sessions: rest('GET /api/sessions'),
  get_session: rest('GET /api/sessions/:sessionId'),
  get_session_logs: rest('GET /api/sessions/:sessionId/logs'),
  list_active_executions: rest('GET /api/executions/active'),
  get_execution: rest('GET /api/executions/:executionId'),
  wait_for_execution: R.ExecutionWait,
  cancel_execution: rest('POST /api/executions/:executionId/cancel'),

  get_usage: rest('GET /api/usage'),
  get_profile: rest('GET /api/profile'),

  list_webhooks: rest('GET /api/webhooks'),
  create_webhook: rest('POST /api/webhooks'),
  update_webhook: rest('PATCH /api/webhooks/:id'),
  delete_webhook: rest('DELETE /api/webhooks/:id'),

  list_models: R.ModelList,
};
