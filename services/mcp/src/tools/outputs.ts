import { OPERATIONS } from '@imagegen/api-schemas';
import * as R from '@imagegen/api-schemas/resources.ts';
import { z } from 'zod';

/**
 * The result of each MCP tool (its structuredContent when it succeeds): the answer of its REST twin, taken from
 * the operation catalogue of @imagegen/api-schemas, so the REST and MCP forms of a resource cannot drift apart.
 * The end-to-end helper callTool (test/e2e/mcp-support.ts) holds every successful result to these, strictly.
 *
 * Not yet published as the tools' outputSchema: the SDK client (1.32) validates the structuredContent of error
 * results against outputSchema as well, and error results carry {status, error, details} there; publishing needs
 * error results without structuredContent (or an outputSchema that admits the error form) first.
 */

/** The success schema of a REST operation ("METHOD /path"). */
function rest(key: string): z.ZodTypeAny {
  const schema = OPERATIONS[key]?.ok.schema;
  if (!schema) throw new Error(`no REST answer schema for ${key}`);
  return schema;
}

/** A generation tool's REST answer plus the executionId MCP adds. */
const withExecution = (key: string) => (rest(key) as z.AnyZodObject).extend({ executionId: z.string() });
const restData = (key: string) => (rest(key) as z.AnyZodObject).shape.data as z.ZodTypeAny;

/**
 * generate_image has none: with async: true it answers the started run instead of the images (an MCP
 * outputSchema is one object schema). Its images are generatedImageJson, the same function REST uses.
 */
export const TOOL_OUTPUTS: Record<string, z.AnyZodObject> = {
  edit_image: rest('POST /api/edit-image') as z.AnyZodObject,
  get_image_info: restData('GET /api/images/:id') as z.AnyZodObject,
  list_images: rest('GET /api/images') as z.AnyZodObject,
  delete_images: restData('POST /api/images/delete-bulk') as z.AnyZodObject,
  upload_image_for_editing: rest('POST /api/upload-for-editing') as z.AnyZodObject,

  list_characters: rest('GET /api/characters') as z.AnyZodObject,
  get_character: rest('GET /api/characters/:identifier') as z.AnyZodObject,
  create_character: rest('POST /api/characters') as z.AnyZodObject,
  update_character: rest('PATCH /api/characters/:identifier') as z.AnyZodObject,
  delete_character: rest('DELETE /api/characters/:identifier') as z.AnyZodObject,
  generate_character_image: withExecution('POST /api/characters/:identifier/generate'),
  generate_multi_character_image: withExecution('POST /api/characters/generate-multi'),

  list_products: rest('GET /api/products') as z.AnyZodObject,
  get_product: rest('GET /api/products/:identifier') as z.AnyZodObject,
  create_product: rest('POST /api/products') as z.AnyZodObject,
  update_product: rest('PATCH /api/products/:identifier') as z.AnyZodObject,
  delete_product: rest('DELETE /api/products/:identifier') as z.AnyZodObject,
  generate_product_image: withExecution('POST /api/products/:identifier/generate'),

  list_scenes: rest('GET /api/scenes') as z.AnyZodObject,
  get_scene: rest('GET /api/scenes/:identifier') as z.AnyZodObject,
  create_scene: rest('POST /api/scenes') as z.AnyZodObject,
  update_scene: rest('PATCH /api/scenes/:identifier') as z.AnyZodObject,
  delete_scene: rest('DELETE /api/scenes/:identifier') as z.AnyZodObject,

  list_style_presets: rest('GET /api/style-presets') as z.AnyZodObject,
  get_style_preset: rest('GET /api/style-presets/:id') as z.AnyZodObject,
  create_style_preset: rest('POST /api/style-presets') as z.AnyZodObject,
  update_style_preset: rest('PATCH /api/style-presets/:id') as z.AnyZodObject,
  delete_style_preset: rest('DELETE /api/style-presets/:id') as z.AnyZodObject,

  list_search_presets: rest('GET /api/search-presets') as z.AnyZodObject,
  create_search_preset: rest('POST /api/search-presets') as z.AnyZodObject,
  delete_search_preset: rest('DELETE /api/search-presets/:id') as z.AnyZodObject,

  list_sessions: rest('GET /api/sessions') as z.AnyZodObject,
  get_session: rest('GET /api/sessions/:sessionId') as z.AnyZodObject,
  list_active_executions: rest('GET /api/executions/active') as z.AnyZodObject,
  get_execution: rest('GET /api/executions/:executionId') as z.AnyZodObject,

  get_usage: rest('GET /api/usage') as z.AnyZodObject,
  get_profile: R.Profile,

  list_webhooks: rest('GET /api/webhooks') as z.AnyZodObject,
  create_webhook: z.object({ data: R.WebhookCreated }),
  delete_webhook: rest('DELETE /api/webhooks/:id') as z.AnyZodObject,
};
