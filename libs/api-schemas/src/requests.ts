import { z } from 'zod';
import { ASPECT_RATIOS, ID_MAX, MODEL_IDS } from './vocab.js';

/**
 * Request bodies defined once. The REST route validates the JSON types of these (typesOnly: the services then
 * report every rule at once with the SPEC's texts), the OpenAPI document shows them with every rule, and the MCP
 * tools take the same fields as their arguments (with the same rules, checked by zod).
 */

const id = (what: string) => z.number().int().min(1).max(ID_MAX).describe(what);
const ids = (max: number, what: string) => z.array(z.number().int().min(1).max(ID_MAX)).min(1).max(max).describe(what);
const sessionId = () =>
  z.string().min(1).max(200).describe('Application session id (1-200 characters) grouping operations; else X-Session-Id; else a new one');

/** POST /api/images and the MCP tool generate_image (which adds scene_id, scene_name and async). */
export const GenerateImagesBody = z.object({
  prompt: z.string().min(1).max(32000).describe('What to draw: at most 16384 characters for provA models, 32000 for provB models'),
  negative_prompt: z.string().max(1024).optional().describe('What to avoid (at most 1024 characters)'),
  aspect_ratio: z.enum(ASPECT_RATIOS).optional().describe('Default: the scene, style preset or character default, else 1:1'),
  n: z.number().int().min(1).max(4).optional().describe('Images to generate, 1-4 (default 1)'),
  model_id: z.enum(MODEL_IDS).optional().describe("Default: the tenant's model; must be in the tenant's allowlist"),
  resolution_tier: z.string().optional().describe('provA only: 0.5k, 1k, 2k or 4k; provA-flash-lite-image is fixed at 1k'),
  use_provA_search: z.boolean().optional().describe('Web search grounding (provA-flash-image, provA-pro-image)'),
  enable_thinking: z.boolean().optional().describe('provA models only'),
  size: z.string().optional().describe('provB only: auto or WIDTHxHEIGHT (multiples of 16, max edge 3840, ratio <= 3:1)'),
  output_format: z.enum(['png', 'jpeg', 'webp']).optional().describe('provB only (default png)'),
  quality: z.enum(['low', 'medium', 'high', 'auto', 'xhigh', 'max']).optional().describe('provB only; xhigh and max need the 2.5 models'),
  output_compression: z.number().int().min(0).max(100).optional().describe('provB only, with jpeg or webp: 0-100'),
  background: z.enum(['auto', 'opaque', 'transparent']).optional().describe('provB only; transparent needs a 2.5 model and png or webp'),
  moderation: z.enum(['auto', 'low']).optional().describe('provB only (default auto)'),
  system_instruction: z.string().optional().describe('Style guidance for the model'),
  style_preset_id: id('Apply a saved style preset (by id)').optional(),
  style_preset_name: z.string().min(1).optional().describe('Apply a saved style preset (by name)'),
  reference_images: z.array(z.string().min(1)).optional().describe('Extra reference images: storage keys of this tenant'),
  reference_group_id: id('A saved reference group (scene id)').optional(),
  reference_group_ids: ids(5, '1-5 saved reference groups (scene ids)').optional(),
  reference_group_name: z.string().min(1).optional().describe('A saved reference group (scene name)'),
  reference_mode: z.enum(['style', 'add']).optional().describe('How references are used'),
  character_id: id('One saved character; not with character_ids').optional(),
  character_ids: ids(5, '1-5 saved characters; not with character_id').optional(),
  product_id: id('One saved product; not with product_ids').optional(),
  product_ids: ids(6, '1-6 saved products; not with product_id').optional(),
  image_to_edit_id: id('Edit this image of the library instead of generating from scratch').optional(),
  session_id: sessionId().optional(),
});

/** POST /api/edit-image and the MCP tool edit_image. */
export const EditImageBody = z.object({
  image_id: id('The image to edit (one of this tenant)'),
  prompt: z.string().min(1).max(32000).describe('The change to make'),
  negative_prompt: z.string().max(1024).optional().describe('What to avoid'),
  aspect_ratio: z.enum(ASPECT_RATIOS).optional().describe("Default: the source image's shape"),
  model_id: z.enum(MODEL_IDS).optional().describe("Model (default: the tenant's model)"),
  session_id: sessionId().optional(),
});

/** POST /api/upload-for-editing. */
export const UploadForEditingBody = z.object({
  image_url: z
    .string()
    .min(1)
    .url()
    .describe('A public http(s) URL: PNG, JPEG, WebP or single-frame GIF, at most 20 MB and 4,194,304 pixels'),
  file_name: z.string().optional().describe('A name recorded with the image'),
  mime_type: z.enum(['image/png', 'image/jpeg', 'image/webp', 'image/gif']).optional().describe('The stored type is detected'),
  session_id: sessionId().optional(),
});

/** SPEC 4.6: the filters of a search preset. */
export const SearchFilters = z.object({
  search: z.string().max(200).optional(),
  searchMode: z.enum(['exact', 'all', 'any']).optional(),
  dateFrom: z.string().optional().describe('ISO 8601 date or date-time'),
  dateTo: z.string().optional().describe('ISO 8601 date or date-time'),
  aspectRatio: z.string().optional(),
  operationType: z.string().optional().describe('generate, edit, ...'),
  minSize: z.number().int().min(0).optional().describe('bytes'),
  maxSize: z.number().int().min(0).optional().describe('bytes'),
  sessionId: z.string().optional(),
  hasNegativePrompt: z.boolean().optional(),
  sortBy: z.enum(['newest', 'oldest', 'largest', 'smallest']).optional(),
});

/** POST /api/search-presets (camelCase, SPEC 4.6) and the MCP tool create_search_preset. */
export const SearchPresetBody = z.object({
  presetName: z.string().min(1).max(50).describe('1-50 characters, unique per tenant'),
  filters: SearchFilters,
});

/** POST /api/style-presets. */
export const StylePresetBody = z.object({
  name: z.string().min(1).max(128).describe('1-128 characters, unique per tenant'),
  prompt: z.string().max(2048).nullable().optional().describe('Prepended to the request prompt'),
  negative_prompt: z.string().max(1024).nullable().optional(),
  system_instruction: z.string().max(512).nullable().optional(),
  aspect_ratio: z.enum(ASPECT_RATIOS).nullable().optional(),
});
