import { z } from 'zod';
import {
  ACTIVE_EXECUTIONS_LIMIT_DEFAULT,
  ACTIVE_EXECUTIONS_LIMIT_MAX,
  ADDITIONAL_DETAILS_MAX,
  ADMIN_ROLES,
  API_KEY_TYPES,
  API_KEYS_PER_TENANT_MAX,
  ASPECT_RATIO_FILTER_MAX,
  ASPECT_RATIOS,
  ASSET_LIST_LIMIT_DEFAULT,
  ASSET_SORTS,
  BACKGROUNDS,
  BASE_PROMPT_MAX,
  BASE_PROMPT_MIN,
  CHARACTER_DESCRIPTION_MAX,
  CHARACTER_NAME_MAX,
  CHARACTER_NEGATIVE_PROMPT_MAX,
  CHARACTER_REFERENCE_IMAGES_MAX,
  CHARACTER_SCENE_PROMPT_MIN,
  CHARACTER_SYSTEM_INSTRUCTION_MAX,
  CHARACTERS_PER_REQUEST_MAX,
  CURSOR_MAX,
  DISPLAY_NAME_MAX,
  EMAIL_MAX,
  GENERATE_SCENE_PROMPT_MAX,
  ID_MAX,
  IMAGE_SORTS,
  IMAGES_PER_REQUEST_MAX,
  INT32_MAX,
  INVITATION_DAYS_DEFAULT,
  INVITATION_DAYS_MAX,
  KEY_NAME_MAX,
  LIST_LIMIT_DEFAULT,
  LIST_LIMIT_MAX,
  MAX_BULK_DELETE,
  MAX_DOWNLOAD_IDS,
  MODEL_IDS,
  MODERATIONS,
  MULTI_CHARACTER_SCENE_PROMPT_MIN,
  MULTI_CHARACTERS_MIN,
  NEGATIVE_PROMPT_MAX,
  OPERATION_TYPE_FILTER_MAX,
  OUTPUT_COMPRESSION_MAX,
  OUTPUT_FORMATS,
  PASSWORD_MAX,
  PASSWORD_MIN,
  PRODUCT_ASPECT_RATIOS,
  PRODUCT_DESCRIPTION_MAX,
  PRODUCT_NAME_MAX,
  PRODUCTS_PER_REQUEST_MAX,
  PROMPT_MAX,
  PROVB_SIZE_LIMITS,
  PROVIDER_KEY_MAX,
  PROVIDER_POOL_KEYS_MAX,
  QUALITIES,
  REFERENCE_GROUPS_PER_REQUEST_MAX,
  REFERENCE_MODES,
  REFERENCE_URL_MAX,
  RESOLUTION_TIER_FILTER_MAX,
  SCENE_DESCRIPTION_MAX,
  SCENE_NAME_MAX,
  SCENE_PROMPT_MAX,
  SCENE_REFERENCES_MAX,
  SEARCH_MODES,
  SEARCH_PRESET_NAME_MAX,
  SEARCH_QUERY_MAX,
  SESSION_ID_MAX,
  SESSION_LOGS_LIMIT_DEFAULT,
  SESSION_LOGS_LIMIT_MAX,
  SIGNING_GRACE_SECONDS_MAX,
  STYLE_PRESET_NAME_MAX,
  STYLE_PRESET_NEGATIVE_PROMPT_MAX,
  STYLE_PRESET_PROMPT_MAX,
  STYLE_PRESET_SYSTEM_INSTRUCTION_MAX,
  TAG_MAX,
  TAGS_MAX,
  TENANT_ID_MAX,
  TENANT_NAME_MAX,
  TENANT_NOTES_MAX,
  UPLOAD_MIME_TYPES,
  USAGE_MONTHS_DEFAULT,
  USAGE_MONTHS_MAX,
  WEBHOOK_DESCRIPTION_MAX,
  WEBHOOK_EVENT_TYPES,
  WEBHOOK_EVENTS_MAX,
  WEBHOOK_URL_MAX,
} from './vocab.js';

/**
 * Request bodies and list queries defined once. A REST route validates either the whole schema (wireSchema) or,
 * where its service reports every rule at once with the SPEC's texts, the JSON types only (typesOnly, or
 * checkedByService for single fields), as its operation says (operations.ts `validate`); the OpenAPI document shows
 * every rule; the MCP tools take the same fields
 * as their arguments (`.shape`, checked by zod). Bodies the REST API takes with unknown fields ignored are
 * `.passthrough()` (MCP refuses unknown arguments all the same: its framework makes every input strict).
 */

const id = (what: string) => z.number().int().min(1).max(ID_MAX).describe(what);
const ids = (max: number, what: string) => z.array(z.number().int().min(1).max(ID_MAX)).min(1).max(max).describe(what);
const nullableStr = (max: number, what: string) => z.string().max(max).nullable().optional().describe(what);
const sessionId = () =>
  z
    .string()
    .min(1)
    .max(SESSION_ID_MAX)
    .describe(`Application session id (1-${SESSION_ID_MAX} characters) grouping operations; else X-Session-Id; else a new one`);

/** POST /api/images and the MCP tool generate_image (which adds scene_id, scene_name and async). */
export const GenerateImagesBody = z.object({
  prompt: z
    .string()
    .min(1)
    .max(PROMPT_MAX.provB)
    .describe(`What to draw: at most ${PROMPT_MAX.provA} characters for provA models, ${PROMPT_MAX.provB} for provB models`),
  negative_prompt: z.string().max(NEGATIVE_PROMPT_MAX).optional().describe(`What to avoid (at most ${NEGATIVE_PROMPT_MAX} characters)`),
  aspect_ratio: z.enum(ASPECT_RATIOS).optional().describe('Default: the scene, style preset or character default, else 1:1'),
  n: z.number().int().min(1).max(IMAGES_PER_REQUEST_MAX).optional().describe(`Images to generate, 1-${IMAGES_PER_REQUEST_MAX} (default 1)`),
  model_id: z.enum(MODEL_IDS).optional().describe("Default: the tenant's model; must be in the tenant's allowlist"),
  resolution_tier: z.string().optional().describe('provA only: 0.5k, 1k, 2k or 4k; provA-flash-lite-image is fixed at 1k'),
  use_provA_search: z.boolean().optional().describe('Web search grounding (provA-flash-image, provA-pro-image)'),
  enable_thinking: z.boolean().optional().describe('provA models only'),
  size: z
    .string()
    .optional()
    .describe(
      `provB only: auto or WIDTHxHEIGHT (multiples of ${PROVB_SIZE_LIMITS.multiple}, max edge ${PROVB_SIZE_LIMITS.maxEdge}, ratio <= ${PROVB_SIZE_LIMITS.maxRatio}:1)`,
    ),
  output_format: z.enum(OUTPUT_FORMATS).optional().describe('provB only (default png)'),
  quality: z.enum(QUALITIES).optional().describe('provB only; xhigh and max need the 2.5 models'),
  output_compression: z
    .number()
    .int()
    .min(0)
    .max(OUTPUT_COMPRESSION_MAX)
    .optional()
    .describe(`provB only, with jpeg or webp: 0-${OUTPUT_COMPRESSION_MAX}`),
  background: z.enum(BACKGROUNDS).optional().describe('provB only; transparent needs a 2.5 model and png or webp'),
  moderation: z.enum(MODERATIONS).optional().describe('provB only (default auto)'),
  system_instruction: z.string().optional().describe('Style guidance for the model'),
  style_preset_id: id('Apply a saved style preset (by id)').optional(),
  style_preset_name: z.string().min(1).optional().describe('Apply a saved style preset (by name)'),
  reference_images: z.array(z.string().min(1)).optional().describe('Extra reference images: storage keys of this tenant'),
  reference_group_id: id('A saved reference group (scene id)').optional(),
  reference_group_ids: ids(
    REFERENCE_GROUPS_PER_REQUEST_MAX,
    `1-${REFERENCE_GROUPS_PER_REQUEST_MAX} saved reference groups (scene ids)`,
  ).optional(),
  reference_group_name: z.string().min(1).optional().describe('A saved reference group (scene name)'),
  reference_mode: z.enum(REFERENCE_MODES).optional().describe('How references are used'),
  character_id: id('One saved character; not with character_ids').optional(),
  character_ids: ids(CHARACTERS_PER_REQUEST_MAX, `1-${CHARACTERS_PER_REQUEST_MAX} saved characters; not with character_id`).optional(),
  product_id: id('One saved product; not with product_ids').optional(),
  product_ids: ids(PRODUCTS_PER_REQUEST_MAX, `1-${PRODUCTS_PER_REQUEST_MAX} saved products; not with product_id`).optional(),
  image_to_edit_id: id('Edit this image of the library instead of generating from scratch').optional(),
  session_id: sessionId().optional(),
});

/** POST /api/edit-image and the MCP tool edit_image. */
export const EditImageBody = z.object({
  image_id: id('The image to edit (one of this tenant)'),
  prompt: z.string().min(1).max(PROMPT_MAX.provB).describe('The change to make'),
  negative_prompt: z.string().max(NEGATIVE_PROMPT_MAX).optional().describe('What to avoid'),
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
  mime_type: z.enum(UPLOAD_MIME_TYPES).optional().describe('The stored type is detected'),
  session_id: sessionId().optional(),
});

/** SPEC 4.6: the filters of a search preset. */
export const SearchFilters = z.object({
  search: z.string().max(SEARCH_QUERY_MAX).optional(),
  searchMode: z.enum(SEARCH_MODES).optional(),
  dateFrom: z.string().optional().describe('ISO 8601 date or date-time'),
  dateTo: z.string().optional().describe('ISO 8601 date or date-time'),
  aspectRatio: z.string().optional(),
  operationType: z.string().optional().describe('generate, edit, ...'),
  minSize: z.number().int().min(0).optional().describe('bytes'),
  maxSize: z.number().int().min(0).optional().describe('bytes'),
  sessionId: z.string().optional(),
  hasNegativePrompt: z.boolean().optional(),
  sortBy: z.enum(IMAGE_SORTS).optional(),
});

/** POST /api/search-presets (camelCase, SPEC 4.6) and the MCP tool create_search_preset. */
export const SearchPresetBody = z.object({
  presetName: z.string().min(1).max(SEARCH_PRESET_NAME_MAX).describe(`1-${SEARCH_PRESET_NAME_MAX} characters, unique per tenant`),
  filters: SearchFilters,
});

/** POST /api/style-presets and the MCP tool create_style_preset. */
export const StylePresetBody = z
  .object({
    name: z.string().min(1).max(STYLE_PRESET_NAME_MAX).describe(`1-${STYLE_PRESET_NAME_MAX} characters, unique per tenant`),
    prompt: nullableStr(STYLE_PRESET_PROMPT_MAX, `Prepended to the request prompt (max ${STYLE_PRESET_PROMPT_MAX})`),
    negative_prompt: nullableStr(
      STYLE_PRESET_NEGATIVE_PROMPT_MAX,
      `Used when a request has none (max ${STYLE_PRESET_NEGATIVE_PROMPT_MAX})`,
    ),
    system_instruction: nullableStr(STYLE_PRESET_SYSTEM_INSTRUCTION_MAX, `Guides the model (max ${STYLE_PRESET_SYSTEM_INSTRUCTION_MAX})`),
    aspect_ratio: z.enum(ASPECT_RATIOS).nullable().optional().describe('Used when a request has none (null clears)'),
  })
  .passthrough();

/** PATCH /api/style-presets/:id and update_style_preset: only given fields change, new_name renames. */
export const StylePresetUpdateBody = StylePresetBody.omit({ name: true })
  .extend({ new_name: StylePresetBody.shape.name.describe(`Renames the preset: 1-${STYLE_PRESET_NAME_MAX} characters, unique per tenant`) })
  .partial();

// ---- the validated form of bodies whose service checks some rules with the SPEC's own texts ----

/** A field reduced to its JSON type (optional, nullable and default kept; ids keep their int64 wire bounds). */
function jsonTypeOf(t: z.ZodTypeAny): z.ZodTypeAny {
  if (t instanceof z.ZodOptional) return jsonTypeOf(t.unwrap()).optional();
  if (t instanceof z.ZodNullable) return jsonTypeOf(t.unwrap()).nullable();
  if (t instanceof z.ZodDefault) return jsonTypeOf(t.removeDefault()).default(t._def.defaultValue());
  if (t instanceof z.ZodString || t instanceof z.ZodEnum) return z.string();
  if (t instanceof z.ZodNumber) return t.isInt ? z.number().int().min(-ID_MAX).max(ID_MAX) : z.number();
  if (t instanceof z.ZodBoolean) return z.boolean();
  if (t instanceof z.ZodArray) return z.array(jsonTypeOf(t.element));
  throw new Error(`checkedByService: unsupported field type ${t.constructor.name}`);
}

/**
 * `schema` with `fields` reduced to their JSON types: what the REST route and the MCP tool check when the
 * service checks those fields' rules itself, answering with the texts the SPEC fixes (e.g. 'Base prompt must be
 * between 10 and 2000 characters'). The OpenAPI document shows `schema` with every rule.
 */
export function checkedByService<T extends z.ZodRawShape, K extends keyof T & string>(
  schema: z.ZodObject<T, z.UnknownKeysParam>,
  fields: K[],
) {
  const loose = Object.fromEntries(fields.map((f) => [f, jsonTypeOf(schema.shape[f]).describe(schema.shape[f].description ?? f)])) as {
    [P in K]: z.ZodTypeAny;
  };
  return schema.extend(loose);
}

/**
 * What create_style_preset checks (the name's rule: SPEC 7 text, by the service). POST /api/style-presets also
 * takes a missing or null name to the service, which answers it with the same SPEC text.
 */
export const StylePresetInput = checkedByService(StylePresetBody, ['name', 'aspect_ratio']);
/** What PATCH /api/style-presets/:id and update_style_preset check. */
export const StylePresetUpdateInput = checkedByService(StylePresetUpdateBody, ['new_name', 'aspect_ratio']);
/** What POST /api/style-presets checks: a missing or null name reaches the service, which answers it with SPEC 7's text. */
export const StylePresetRestInput = StylePresetInput.extend({ name: StylePresetInput.shape.name.nullable().optional() });
/** What PATCH /api/style-presets/:id checks: a null new_name reaches the service too. */
export const StylePresetRestUpdateInput = StylePresetUpdateInput.extend({ new_name: StylePresetUpdateInput.shape.new_name.nullable() });

/**
 * create_search_preset: POST /api/search-presets' body with the name as preset_name (snake_case, as every tool
 * argument). Like the REST route it checks the JSON types only: the service reports every rule with SPEC 7's
 * texts (which name the REST fields, e.g. 'presetName cannot be empty'); unknown filters are the service's to refuse.
 */
export const SearchPresetInput = z.object({
  preset_name: checkedByService(SearchPresetBody, ['presetName']).shape.presetName,
  filters: checkedByService(SearchFilters, Object.keys(SearchFilters.shape) as (keyof typeof SearchFilters.shape)[])
    .passthrough()
    .describe(`Gallery filters: ${Object.keys(SearchFilters.shape).join(', ')}`),
});

/** What POST /api/upload-for-editing and upload_image_for_editing check (the generation service checks the rest). */
export const UploadForEditingInput = checkedByService(UploadForEditingBody, ['image_url', 'mime_type']);

// ---- saved assets (SPEC 4.2-4.5) ----

const pageSize = (def: number, max: number) =>
  z.number().int().min(1).max(max).default(def).describe(`Page size (default ${def}, max ${max})`);
const offset = () => z.number().int().min(0).max(INT32_MAX).default(0).describe('Items to skip (default 0)');
/** The `cursor` of the keyset-paged lists: a previous answer's pagination.nextCursor. */
const listCursor = z.string().max(CURSOR_MAX).optional();

/** The list query of the searchable, sortable asset lists: GET /api/characters, /api/scenes and list_characters, list_scenes. */
export const AssetListQuery = z
  .object({
    limit: pageSize(ASSET_LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX),
    offset: offset(),
    search: z.string().max(SEARCH_QUERY_MAX).optional().describe(`Name search (max ${SEARCH_QUERY_MAX} characters)`),
    sort_by: z.enum(ASSET_SORTS).default('name').describe('name (default), created, used, recent'),
    cursor: listCursor.describe('Continue after the last item of a previous answer (its pagination.nextCursor); not with offset'),
  })
  .passthrough();

/** GET /api/products and list_products. */
export const ProductListQuery = z
  .object({
    page: z.number().int().min(1).max(INT32_MAX).default(1).describe('1-based page (default 1)'),
    page_size: pageSize(LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX),
    search: z.string().max(SEARCH_QUERY_MAX).optional().describe(`Matches name, description and tags (max ${SEARCH_QUERY_MAX} characters)`),
    cursor: listCursor.describe('Continue after the last product of a previous answer (its pagination.nextCursor); not with page > 1'),
  })
  .passthrough();

/** GET /api/style-presets and list_style_presets. */
export const StylePresetListQuery = AssetListQuery.pick({ limit: true, offset: true, cursor: true }).extend({
  search: z
    .string()
    .max(SEARCH_QUERY_MAX)
    .optional()
    .describe(`Extension: matches the name and the prompt (max ${SEARCH_QUERY_MAX} characters)`),
});

/** POST /api/characters and create_character. */
export const CharacterBody = z
  .object({
    character_name: z.string().min(1).max(CHARACTER_NAME_MAX).describe(`Unique name (1-${CHARACTER_NAME_MAX} characters)`),
    base_prompt: z
      .string()
      .min(BASE_PROMPT_MIN)
      .max(BASE_PROMPT_MAX)
      .describe(`How the character looks (${BASE_PROMPT_MIN}-${BASE_PROMPT_MAX} characters)`),
    description: nullableStr(CHARACTER_DESCRIPTION_MAX, `Description (max ${CHARACTER_DESCRIPTION_MAX})`),
    negative_prompt: nullableStr(CHARACTER_NEGATIVE_PROMPT_MAX, `Negative prompt (max ${CHARACTER_NEGATIVE_PROMPT_MAX})`),
    system_instruction: nullableStr(CHARACTER_SYSTEM_INSTRUCTION_MAX, `System instruction (max ${CHARACTER_SYSTEM_INSTRUCTION_MAX})`),
    preferred_aspect_ratio: z
      .enum(ASPECT_RATIOS)
      .nullable()
      .optional()
      .describe('Default aspect ratio when generating this character (null clears)'),
    // Ids that are no image of the tenant (0 and negatives included) answer SPEC 7's invalid_ids error (service).
    reference_image_ids: z
      .array(z.number().int().min(-ID_MAX).max(ID_MAX))
      .max(CHARACTER_REFERENCE_IMAGES_MAX)
      .optional()
      .describe(`Up to ${CHARACTER_REFERENCE_IMAGES_MAX} library image ids of this tenant (replace on update)`),
    tags: z
      .array(z.string().max(TAG_MAX))
      .max(TAGS_MAX)
      .nullable()
      .optional()
      .describe(`Up to ${TAGS_MAX} tags of at most ${TAG_MAX} characters (replace on update, null clears)`),
  })
  .passthrough();

/** PATCH /api/characters/:identifier and update_character: only given fields change. */
export const CharacterUpdateBody = CharacterBody.partial();

/** What the character routes and tools check: the service checks these two with SPEC 7's texts. */
export const CharacterInput = checkedByService(CharacterBody, ['base_prompt', 'preferred_aspect_ratio']);
export const CharacterUpdateInput = checkedByService(CharacterUpdateBody, ['base_prompt', 'preferred_aspect_ratio']);

/** POST /api/characters/:identifier/generate and generate_character_image. */
export const CharacterGenerateBody = z
  .object({
    scene_prompt: z
      .string()
      .min(CHARACTER_SCENE_PROMPT_MIN)
      .max(GENERATE_SCENE_PROMPT_MAX)
      .describe(`The scene (${CHARACTER_SCENE_PROMPT_MIN}-${GENERATE_SCENE_PROMPT_MAX} characters)`),
    additional_details: nullableStr(
      ADDITIONAL_DETAILS_MAX,
      `Extra details, appended as "Additional details: ..." (max ${ADDITIONAL_DETAILS_MAX})`,
    ),
    aspect_ratio: z.string().optional().describe("Overrides the character's preferred aspect ratio"),
    override_negative_prompt: nullableStr(NEGATIVE_PROMPT_MAX, `Replaces the character's negative prompt (max ${NEGATIVE_PROMPT_MAX})`),
    session_id: sessionId().optional(),
  })
  .passthrough();

/** POST /api/characters/generate-multi and generate_multi_character_image. */
export const MultiCharacterGenerateBody = z
  .object({
    character_ids: z
      .array(z.number().int().min(1).max(ID_MAX))
      .min(MULTI_CHARACTERS_MIN)
      .max(CHARACTERS_PER_REQUEST_MAX)
      .describe(`${MULTI_CHARACTERS_MIN}-${CHARACTERS_PER_REQUEST_MAX} distinct character ids`),
    scene_prompt: z
      .string()
      .min(MULTI_CHARACTER_SCENE_PROMPT_MIN)
      .max(GENERATE_SCENE_PROMPT_MAX)
      .describe(`The scene (${MULTI_CHARACTER_SCENE_PROMPT_MIN}-${GENERATE_SCENE_PROMPT_MAX} characters)`),
    additional_details: CharacterGenerateBody.shape.additional_details,
    aspect_ratio: z.string().default('landscape').describe('Default landscape'),
    session_id: sessionId().optional(),
  })
  .passthrough();

/** POST /api/products and create_product (product_url is fetched server-side, SSRF-guarded). */
export const ProductBody = z
  .object({
    product_name: z.string().min(1).max(PRODUCT_NAME_MAX).describe(`Unique name (1-${PRODUCT_NAME_MAX} characters)`),
    product_url: z.string().describe('Public HTTP or HTTPS image URL'),
    product_description: nullableStr(PRODUCT_DESCRIPTION_MAX, `Description (max ${PRODUCT_DESCRIPTION_MAX})`),
    tags: z.string().nullable().optional().describe(`Comma-separated tags, each at most ${TAG_MAX} characters (null clears)`),
  })
  .passthrough();

/** PATCH /api/products/:identifier and update_product: only given fields change. */
export const ProductUpdateBody = ProductBody.omit({ product_url: true }).partial();

/** POST /api/products/:identifier/generate and generate_product_image. */
export const ProductGenerateBody = z
  .object({
    scene_prompt: z.string().min(1).max(GENERATE_SCENE_PROMPT_MAX).describe(`The scene (1-${GENERATE_SCENE_PROMPT_MAX} characters)`),
    additional_details: CharacterGenerateBody.shape.additional_details,
    aspect_ratio: z.enum(PRODUCT_ASPECT_RATIOS).optional().describe('Aspect ratio'),
    negative_prompt: nullableStr(NEGATIVE_PROMPT_MAX, `What to avoid (max ${NEGATIVE_PROMPT_MAX})`),
    number_of_images: z.number().int().min(1).max(IMAGES_PER_REQUEST_MAX).default(1).describe(`1-${IMAGES_PER_REQUEST_MAX} (default 1)`),
    session_id: sessionId().optional(),
  })
  .passthrough();

/**
 * POST /api/scenes and create_scene. The REST route checks the JSON types by hand (problems answer SPEC 7's
 * 'Invalid scene preset payload'); the library service checks these rules with the same text.
 */
export const SceneBody = z
  .object({
    scene_name: z.string().min(1).max(SCENE_NAME_MAX).describe(`Unique name (1-${SCENE_NAME_MAX} characters)`),
    description: nullableStr(SCENE_DESCRIPTION_MAX, `Description (max ${SCENE_DESCRIPTION_MAX})`),
    scene_prompt: nullableStr(SCENE_PROMPT_MAX, `Prompt prefix (max ${SCENE_PROMPT_MAX})`),
    reference_image_ids: z
      .array(z.number().int().min(1).max(ID_MAX))
      .max(SCENE_REFERENCES_MAX)
      .nullable()
      .optional()
      .describe(`Existing library image ids (up to ${SCENE_REFERENCES_MAX} with the URLs; replace on update)`),
    reference_image_urls: z
      .array(z.string().min(1).max(REFERENCE_URL_MAX))
      .max(SCENE_REFERENCES_MAX)
      .nullable()
      .optional()
      .describe(`Public image URLs to fetch and add (up to ${SCENE_REFERENCES_MAX} with the ids)`),
    default_reference_mode: z.enum(REFERENCE_MODES).nullable().optional().describe('style or add (null clears)'),
    preferred_aspect_ratio: z.enum(ASPECT_RATIOS).nullable().optional().describe('Default aspect ratio for generation (null clears)'),
    tags: z
      .array(z.string().max(TAG_MAX))
      .max(TAGS_MAX)
      .nullable()
      .optional()
      .describe(`Up to ${TAGS_MAX} tags (replace on update, null clears)`),
  })
  .passthrough();

/** PATCH /api/scenes/:identifier and update_scene: only given fields change; new_scene_name renames. */
export const SceneUpdateBody = SceneBody.omit({ scene_name: true })
  .extend({ new_scene_name: SceneBody.shape.scene_name.describe(`New unique name (1-${SCENE_NAME_MAX} characters)`) })
  .partial();

/** What create_scene and update_scene check (the service checks the aspect ratio with SPEC 7's scene error text). */
export const SceneInput = checkedByService(SceneBody, ['preferred_aspect_ratio']);
export const SceneUpdateInput = checkedByService(SceneUpdateBody, ['preferred_aspect_ratio']);

// ---- the image library (SPEC 4.1) ----

/** GET /api/images (camelCase, SPEC 4.1); list_images takes the same filters in snake_case (snakeCased). */
export const ImageListQuery = z
  .object({
    limit: pageSize(LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX),
    offset: offset(),
    search: z.string().max(SEARCH_QUERY_MAX).optional().describe(`Prompt text search (max ${SEARCH_QUERY_MAX} characters)`),
    searchMode: z.enum(SEARCH_MODES).optional().describe('exact phrase (default), all words, any word'),
    dateFrom: z.string().optional().describe('ISO 8601 date or date-time (inclusive)'),
    dateTo: z.string().optional().describe('ISO 8601 date (whole day included) or date-time (inclusive)'),
    aspectRatio: z.string().max(ASPECT_RATIO_FILTER_MAX).optional().describe('e.g. 1:1'),
    operationType: z.string().max(OPERATION_TYPE_FILTER_MAX).optional().describe('generate, edit, upload, ...'),
    minSize: z.number().int().min(0).max(ID_MAX).optional().describe('Minimum size in bytes'),
    maxSize: z.number().int().min(0).max(ID_MAX).optional().describe('Maximum size in bytes'),
    sessionId: z.string().max(SESSION_ID_MAX).optional().describe('Only images of this session'),
    hasNegativePrompt: z.boolean().optional().describe('Only images with a negative prompt'),
    modelId: z.enum(MODEL_IDS).optional().describe('Only images of this model'),
    resolutionTier: z.string().max(RESOLUTION_TIER_FILTER_MAX).optional().describe('0.5k, 1k, 2k, 4k; comma-separated allowed'),
    stylePresetId: id('Only images made with this style preset').optional(),
    productReferenceId: id('Only images made with this product').optional(),
    isReference: z.boolean().optional().describe('true: reference images only'),
    cursor: listCursor.describe('Continue after the last image of a previous answer (its pagination.nextCursor); not with offset'),
  })
  .passthrough();

/** POST /api/images/delete-bulk; delete_images takes the same ids as image_ids. */
export const DeleteImagesBody = z.object({ ids: ids(MAX_BULK_DELETE, `1-${MAX_BULK_DELETE} image ids (a repeated id counts once)`) });

/** POST /api/images/download (a ZIP of the originals). */
export const DownloadImagesBody = z.object({ imageIds: ids(MAX_DOWNLOAD_IDS, `1-${MAX_DOWNLOAD_IDS} image ids`) });

type SnakeCase<S extends string> = S extends `${infer C}${infer R}`
  ? `${C extends Lowercase<C> ? C : `_${Lowercase<C>}`}${SnakeCase<R>}`
  : S;

/** A camelCase shape (a REST query) with snake_case keys: the arguments of its MCP tool. */
export function snakeCased<T extends z.ZodRawShape>(shape: T): { [K in keyof T & string as SnakeCase<K>]: T[K] } {
  return Object.fromEntries(Object.entries(shape).map(([k, v]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), v])) as never;
}

/**
 * The query of a keyset-paged list of `items` (20 a page by default, at most 100): limit, offset, and the cursor of
 * GET /api/images (one rule for every such list).
 */
const keysetPageQuery = (items: string) =>
  z
    .object({
      limit: pageSize(LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX),
      offset: offset(),
      cursor: ImageListQuery.shape.cursor.describe(
        `Continue after the last ${items} of a previous answer (its pagination.nextCursor); not with offset`,
      ),
    })
    .passthrough();

/** GET /api/search-presets/:id/images and run_search_preset (which adds id): one cursor rule for both (issue 36). */
export const SearchPresetImagesQuery = keysetPageQuery('image');

// ---- sessions, executions and usage (SPEC 4.7, 4.8) ----

/** GET /api/sessions and list_sessions. */
export const SessionListQuery = keysetPageQuery('session');
/** GET /api/sessions/:sessionId/logs and get_session_logs (which adds session_id). */
export const SessionLogsQuery = z.object({ limit: pageSize(SESSION_LOGS_LIMIT_DEFAULT, SESSION_LOGS_LIMIT_MAX) }).passthrough();
/** GET /api/executions/active and list_active_executions. */
export const ActiveExecutionsQuery = z
  .object({ limit: pageSize(ACTIVE_EXECUTIONS_LIMIT_DEFAULT, ACTIVE_EXECUTIONS_LIMIT_MAX) })
  .passthrough();
/** GET /api/usage and get_usage: any invalid limit answers SPEC 7's 'Invalid limit'. */
export const UsageQuery = z
  .object({
    limit: z
      .number()
      .int()
      .min(1)
      .max(USAGE_MONTHS_MAX)
      .default(USAGE_MONTHS_DEFAULT)
      .describe(`Months (default ${USAGE_MONTHS_DEFAULT}, max ${USAGE_MONTHS_MAX})`),
  })
  .passthrough();

// ---- webhooks (SPEC 4.11) ----

/** POST /api/webhooks and create_webhook. */
export const WebhookBody = z
  .object({
    url: z.string().min(1).max(WEBHOOK_URL_MAX).describe('HTTPS URL resolving to public IP addresses'),
    events: z
      .array(z.enum(WEBHOOK_EVENT_TYPES))
      .max(WEBHOOK_EVENTS_MAX)
      .optional()
      .describe(`The event types to receive (${WEBHOOK_EVENT_TYPES.join(', ')}); absent or empty: all of them`),
    description: z.string().max(WEBHOOK_DESCRIPTION_MAX).optional().describe(`Free text (max ${WEBHOOK_DESCRIPTION_MAX})`),
  })
  .passthrough();

/** PATCH /api/webhooks/:id (and update_webhook): enabled, description (null clears) and/or events; at least one. */
export const WebhookUpdateBody = z
  .object({
    enabled: z.boolean().optional().describe('true re-enables an endpoint disabled after failures; false pauses delivery'),
    description: WebhookBody.shape.description.unwrap().nullable().optional(),
    events: WebhookBody.shape.events.describe('The event types to receive from now on (empty: all of them); absent: unchanged'),
  })
  .passthrough();

// ---- administration (SPEC 4.9) ----

const email = () => z.string().email().max(EMAIL_MAX);
const displayName = () => z.string().min(1).max(DISPLAY_NAME_MAX).describe(`1-${DISPLAY_NAME_MAX} characters`);

/** POST /admin/tenants/:tenantId/api-keys, and each of api_keys of POST /admin/tenants. */
export const ApiKeyBody = z
  .object({
    key_name: z.string().min(1).max(KEY_NAME_MAX).describe(`1-${KEY_NAME_MAX} characters, unique per tenant`),
    type: z.enum(API_KEY_TYPES).optional().describe('Default live'),
  })
  .passthrough();

/** POST /admin/tenants/:tenantId/api-keys/:keyRef/signing (signed requests, SPEC 5.8; extension). */
export const ApiKeySigningBody = z
  .object({
    signature_required: z
      .boolean()
      .describe('true: every request with this key must be signed (the signing secret is answered once); false: no longer'),
  })
  .passthrough();

/** POST /admin/tenants/:tenantId/api-keys/:keyRef/signing/rotate (extension). */
export const ApiKeySigningRotateBody = z
  .object({
    grace_period_seconds: z
      .number()
      .int()
      .min(0)
      .max(SIGNING_GRACE_SECONDS_MAX)
      .optional()
      .describe('How long the previous secret is still accepted (0: not at all); default SIGNING_SECRET_GRACE_MS (24 h)'),
  })
  .passthrough();

const providerPool = z
  .union([z.string().min(1).max(PROVIDER_KEY_MAX), z.array(z.string().min(1).max(PROVIDER_KEY_MAX)).max(PROVIDER_POOL_KEYS_MAX)])
  .nullable()
  .optional()
  .describe(`One key, a list of up to ${PROVIDER_POOL_KEYS_MAX} keys, or null (PATCH: null or [] removes the pool).`);

/** POST /admin/tenants (the full API keys are answered once). */
export const TenantBody = z
  .object({
    tenant_id: z.string().min(1).max(TENANT_ID_MAX).describe(`1-${TENANT_ID_MAX} characters`),
    tenant_name: z.string().min(1).max(TENANT_NAME_MAX).describe(`1-${TENANT_NAME_MAX} characters`),
    contact_email: email(),
    provA_api_key: z.string().min(1).max(PROVIDER_KEY_MAX).optional().describe('Legacy: a single provA key.'),
    provider_credentials: z.object({ provA: providerPool, provB: providerPool }).strict().optional(),
    monthly_quota_mb: z.number().int().min(1).max(1_000_000_000).optional(),
    rate_limit_per_minute: z.number().int().min(1).max(1_000_000_000).optional(),
    model_id: z.enum(MODEL_IDS).optional().describe('The default model'),
    // Unique items: the catalogue's bodyRules add uniqueItems to what the route validates (zod arrays have no such rule).
    allowed_models: z.array(z.enum(MODEL_IDS)).min(1).max(MODEL_IDS.length).optional().describe('Distinct model ids'),
    notes: z.string().max(TENANT_NOTES_MAX).nullable().optional(),
    credentials_include_prompt: z
      .boolean()
      .optional()
      .describe("Extension (Content Credentials): write the prompt into the images' signed C2PA manifests (default false)"),
    api_keys: z
      .array(ApiKeyBody)
      .max(API_KEYS_PER_TENANT_MAX)
      .optional()
      .describe('Keys to create with the tenant (default: one live key)'),
  })
  .passthrough();

/** PATCH /admin/tenants/:tenantId: activation, limits, models, provider credential pools. */
export const TenantUpdateBody = TenantBody.omit({ tenant_id: true, api_keys: true })
  .partial()
  .extend({ is_active: z.boolean().optional() });

/** POST /admin/auth/login. */
export const AdminLoginBody = z.object({ email: z.string().min(1).max(EMAIL_MAX), password: z.string().min(1).max(1024) }).passthrough();

/** PATCH /admin/users/:userId. */
export const AdminUserUpdateBody = z
  .object({ display_name: displayName().optional(), role: z.enum(ADMIN_ROLES).optional(), is_active: z.boolean().optional() })
  .passthrough();

/** POST /admin/invitations. */
export const InvitationBody = z
  .object({
    email: email(),
    role: z.enum(ADMIN_ROLES).optional().describe('Default admin'),
    tenant_id: z.string().min(1).max(TENANT_ID_MAX).nullable().optional().describe('Restricts the admin to one tenant'),
    expires_in_days: z.number().int().min(1).max(INVITATION_DAYS_MAX).optional().describe(`Default ${INVITATION_DAYS_DEFAULT}`),
  })
  .passthrough();

/** POST /admin/invitations/:token/accept. */
export const InvitationAcceptBody = z
  .object({
    display_name: displayName(),
    password: z.string().min(PASSWORD_MIN).max(PASSWORD_MAX).describe(`${PASSWORD_MIN}-${PASSWORD_MAX} characters`),
  })
  .passthrough();

/** The TypeScript type of a request body or query (for code that does not depend on zod itself). */
export type Infer<T extends z.ZodTypeAny> = z.infer<T>;

/** POST /admin/tenants/:tenantId/purge (extension, issue 40): the tenant's id repeated, as a confirmation. */
export const TenantPurgeBody = z.object({
  confirm: z.string().min(1).max(128).describe("The tenant's id, repeated: the purge removes everything of the tenant"),
});
