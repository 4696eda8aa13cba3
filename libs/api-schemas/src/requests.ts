import { z } from 'zod';
import { ADMIN_ROLES, ASPECT_RATIOS, ID_MAX, INT32_MAX, MODEL_IDS, QUOTA_EVENTS } from './vocab.js';

/**
 * Request bodies and list queries defined once. A REST route validates either the whole schema (jsonSchema) or,
 * where its service reports every rule at once with the SPEC's texts, the JSON types only (typesOnly, or
 * checkedByService for single fields); the OpenAPI document shows every rule; the MCP tools take the same fields
 * as their arguments (`.shape`, checked by zod). Bodies the REST API takes with unknown fields ignored are
 * `.passthrough()` (MCP refuses unknown arguments all the same: its framework makes every input strict).
 */

const id = (what: string) => z.number().int().min(1).max(ID_MAX).describe(what);
const ids = (max: number, what: string) => z.array(z.number().int().min(1).max(ID_MAX)).min(1).max(max).describe(what);
const nullableStr = (max: number, what: string) => z.string().max(max).nullable().optional().describe(what);
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

/** POST /api/style-presets and the MCP tool create_style_preset. */
export const StylePresetBody = z
  .object({
    name: z.string().min(1).max(128).describe('1-128 characters, unique per tenant'),
    prompt: nullableStr(2048, 'Prepended to the request prompt (max 2048)'),
    negative_prompt: nullableStr(1024, 'Used when a request has none (max 1024)'),
    system_instruction: nullableStr(512, 'Guides the model (max 512)'),
    aspect_ratio: z.enum(ASPECT_RATIOS).nullable().optional().describe('Used when a request has none (null clears)'),
  })
  .passthrough();

/** PATCH /api/style-presets/:id and update_style_preset: only given fields change, new_name renames. */
export const StylePresetUpdateBody = StylePresetBody.omit({ name: true })
  .extend({ new_name: StylePresetBody.shape.name.describe('Renames the preset: 1-128 characters, unique per tenant') })
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
const listCursor = z.string().max(2000).optional();

/** The list query of the searchable, sortable asset lists: GET /api/characters, /api/scenes and list_characters, list_scenes. */
export const AssetListQuery = z
  .object({
    limit: pageSize(50, 100),
    offset: offset(),
    search: z.string().max(200).optional().describe('Name search (max 200 characters)'),
    sort_by: z.enum(['name', 'created', 'used', 'recent']).default('name').describe('name (default), created, used, recent'),
    cursor: listCursor.describe('Continue after the last item of a previous answer (its pagination.nextCursor); not with offset'),
  })
  .passthrough();

/** GET /api/products and list_products. */
export const ProductListQuery = z
  .object({
    page: z.number().int().min(1).max(INT32_MAX).default(1).describe('1-based page (default 1)'),
    page_size: pageSize(20, 100),
    search: z.string().max(200).optional().describe('Matches name, description and tags (max 200 characters)'),
    cursor: listCursor.describe('Continue after the last product of a previous answer (its pagination.nextCursor); not with page > 1'),
  })
  .passthrough();

/** GET /api/style-presets and list_style_presets. */
export const StylePresetListQuery = AssetListQuery.pick({ limit: true, offset: true, cursor: true });

/** POST /api/characters and create_character. */
export const CharacterBody = z
  .object({
    character_name: z.string().min(1).max(100).describe('Unique name (1-100 characters)'),
    base_prompt: z.string().min(10).max(2000).describe('How the character looks (10-2000 characters)'),
    description: nullableStr(500, 'Description (max 500)'),
    negative_prompt: nullableStr(1000, 'Negative prompt (max 1000)'),
    system_instruction: nullableStr(1000, 'System instruction (max 1000)'),
    preferred_aspect_ratio: z
      .enum(ASPECT_RATIOS)
      .nullable()
      .optional()
      .describe('Default aspect ratio when generating this character (null clears)'),
    // Ids that are no image of the tenant (0 and negatives included) answer SPEC 7's invalid_ids error (service).
    reference_image_ids: z
      .array(z.number().int().min(-ID_MAX).max(ID_MAX))
      .max(10)
      .optional()
      .describe('Up to 10 library image ids of this tenant (replace on update)'),
    tags: z
      .array(z.string().max(50))
      .max(20)
      .nullable()
      .optional()
      .describe('Up to 20 tags of at most 50 characters (replace on update, null clears)'),
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
    scene_prompt: z.string().min(5).max(1500).describe('The scene (5-1500 characters)'),
    additional_details: nullableStr(500, 'Extra details, appended as "Additional details: ..." (max 500)'),
    aspect_ratio: z.string().optional().describe("Overrides the character's preferred aspect ratio"),
    override_negative_prompt: nullableStr(1024, "Replaces the character's negative prompt (max 1024)"),
    session_id: sessionId().optional(),
  })
  .passthrough();

/** POST /api/characters/generate-multi and generate_multi_character_image. */
export const MultiCharacterGenerateBody = z
  .object({
    character_ids: z.array(z.number().int().min(1).max(ID_MAX)).min(2).max(5).describe('2-5 distinct character ids'),
    scene_prompt: z.string().min(10).max(1500).describe('The scene (10-1500 characters)'),
    additional_details: CharacterGenerateBody.shape.additional_details,
    aspect_ratio: z.string().default('landscape').describe('Default landscape'),
    session_id: sessionId().optional(),
  })
  .passthrough();

/** POST /api/products and create_product (product_url is fetched server-side, SSRF-guarded). */
export const ProductBody = z
  .object({
    product_name: z.string().min(1).max(100).describe('Unique name (1-100 characters)'),
    product_url: z.string().describe('Public HTTP or HTTPS image URL'),
    product_description: nullableStr(500, 'Description (max 500)'),
    tags: z.string().nullable().optional().describe('Comma-separated tags, each at most 50 characters (null clears)'),
  })
  .passthrough();

/** PATCH /api/products/:identifier and update_product: only given fields change. */
export const ProductUpdateBody = ProductBody.omit({ product_url: true }).partial();

/** POST /api/products/:identifier/generate and generate_product_image. */
export const ProductGenerateBody = z
  .object({
    scene_prompt: z.string().min(1).max(1500).describe('The scene (1-1500 characters)'),
    additional_details: CharacterGenerateBody.shape.additional_details,
    aspect_ratio: z.enum(['1:1', '16:9', '9:16', '4:3', '3:4']).optional().describe('Aspect ratio'),
    negative_prompt: nullableStr(1024, 'What to avoid (max 1024)'),
    number_of_images: z.number().int().min(1).max(4).default(1).describe('1-4 (default 1)'),
    session_id: sessionId().optional(),
  })
  .passthrough();

/**
 * POST /api/scenes and create_scene. The REST route checks the JSON types by hand (problems answer SPEC 7's
 * 'Invalid scene preset payload'); the library service checks these rules with the same text.
 */
export const SceneBody = z
  .object({
    scene_name: z.string().min(1).max(100).describe('Unique name (1-100 characters)'),
    description: nullableStr(500, 'Description (max 500)'),
    scene_prompt: nullableStr(4000, 'Prompt prefix (max 4000)'),
    reference_image_ids: z
      .array(z.number().int().min(1).max(ID_MAX))
      .max(20)
      .nullable()
      .optional()
      .describe('Existing library image ids (up to 20 with the URLs; replace on update)'),
    reference_image_urls: z
      .array(z.string().min(1).max(2048))
      .max(20)
      .nullable()
      .optional()
      .describe('Public image URLs to fetch and add (up to 20 with the ids)'),
    default_reference_mode: z.enum(['style', 'add']).nullable().optional().describe('style or add (null clears)'),
    preferred_aspect_ratio: z.enum(ASPECT_RATIOS).nullable().optional().describe('Default aspect ratio for generation (null clears)'),
    tags: z.array(z.string().max(50)).max(20).nullable().optional().describe('Up to 20 tags (replace on update, null clears)'),
  })
  .passthrough();

/** PATCH /api/scenes/:identifier and update_scene: only given fields change; new_scene_name renames. */
export const SceneUpdateBody = SceneBody.omit({ scene_name: true })
  .extend({ new_scene_name: SceneBody.shape.scene_name.describe('New unique name (1-100 characters)') })
  .partial();

/** What create_scene and update_scene check (the service checks the aspect ratio with SPEC 7's scene error text). */
export const SceneInput = checkedByService(SceneBody, ['preferred_aspect_ratio']);
export const SceneUpdateInput = checkedByService(SceneUpdateBody, ['preferred_aspect_ratio']);

// ---- the image library (SPEC 4.1) ----

/** GET /api/images (camelCase, SPEC 4.1); list_images takes the same filters in snake_case (snakeCased). */
export const ImageListQuery = z
  .object({
    limit: pageSize(20, 100),
    offset: offset(),
    search: z.string().max(200).optional().describe('Prompt text search (max 200 characters)'),
    searchMode: z.enum(['exact', 'all', 'any']).optional().describe('exact phrase (default), all words, any word'),
    dateFrom: z.string().optional().describe('ISO 8601 date or date-time (inclusive)'),
    dateTo: z.string().optional().describe('ISO 8601 date (whole day included) or date-time (inclusive)'),
    aspectRatio: z.string().max(20).optional().describe('e.g. 1:1'),
    operationType: z.string().max(50).optional().describe('generate, edit, upload, ...'),
    minSize: z.number().int().min(0).max(ID_MAX).optional().describe('Minimum size in bytes'),
    maxSize: z.number().int().min(0).max(ID_MAX).optional().describe('Maximum size in bytes'),
    sessionId: z.string().max(200).optional().describe('Only images of this session'),
    hasNegativePrompt: z.boolean().optional().describe('Only images with a negative prompt'),
    modelId: z.enum(MODEL_IDS).optional().describe('Only images of this model'),
    resolutionTier: z.string().max(50).optional().describe('0.5k, 1k, 2k, 4k; comma-separated allowed'),
    stylePresetId: id('Only images made with this style preset').optional(),
    productReferenceId: id('Only images made with this product').optional(),
    isReference: z.boolean().optional().describe('true: reference images only'),
    cursor: listCursor.describe('Continue after the last image of a previous answer (its pagination.nextCursor); not with offset'),
  })
  .passthrough();

export const MAX_BULK_DELETE = 20;
export const MAX_DOWNLOAD_IDS = 100;

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
      limit: pageSize(20, 100),
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
export const SessionLogsQuery = z.object({ limit: pageSize(50, 200) }).passthrough();
/** GET /api/executions/active and list_active_executions. */
export const ActiveExecutionsQuery = z.object({ limit: pageSize(100, 200) }).passthrough();
/** GET /api/usage and get_usage: any invalid limit answers SPEC 7's 'Invalid limit'. */
export const UsageQuery = z
  .object({ limit: z.number().int().min(1).max(24).default(12).describe('Months (default 12, max 24)') })
  .passthrough();

// ---- webhooks (SPEC 4.11) ----

/** POST /api/webhooks and create_webhook. */
export const WebhookBody = z
  .object({
    url: z.string().min(1).max(2048).describe('HTTPS URL resolving to public IP addresses'),
    events: z.array(z.enum(QUOTA_EVENTS)).max(10).optional().describe('Default: both quota events'),
    description: z.string().max(200).optional().describe('Free text (max 200)'),
  })
  .passthrough();

/** PATCH /api/webhooks/:id: enabled and/or description (null clears); at least one of them. */
export const WebhookUpdateBody = z
  .object({
    enabled: z.boolean().optional().describe('true re-enables an endpoint disabled after failures; false pauses delivery'),
    description: WebhookBody.shape.description.unwrap().nullable().optional(),
  })
  .passthrough();

// ---- administration (SPEC 4.9) ----

const email = () => z.string().email().max(320);
const displayName = () => z.string().min(1).max(100).describe('1-100 characters');

/** POST /admin/tenants/:tenantId/api-keys, and each of api_keys of POST /admin/tenants. */
export const ApiKeyBody = z
  .object({
    key_name: z.string().min(1).max(100).describe('1-100 characters, unique per tenant'),
    type: z.enum(['live', 'test']).optional().describe('Default live'),
  })
  .passthrough();

const providerPool = z
  .union([z.string().min(1).max(1000), z.array(z.string().min(1).max(1000)).max(5)])
  .nullable()
  .optional()
  .describe('One key, a list of up to 5 keys, or null (PATCH: null or [] removes the pool).');

/** POST /admin/tenants (the full API keys are answered once). */
export const TenantBody = z
  .object({
    tenant_id: z.string().min(1).max(64).describe('1-64 characters'),
    tenant_name: z.string().min(1).max(200).describe('1-200 characters'),
    contact_email: email(),
    provA_api_key: z.string().min(1).max(1000).optional().describe('Legacy: a single provA key.'),
    provider_credentials: z.object({ provA: providerPool, provB: providerPool }).strict().optional(),
    monthly_quota_mb: z.number().int().min(1).max(1_000_000_000).optional(),
    rate_limit_per_minute: z.number().int().min(1).max(1_000_000_000).optional(),
    model_id: z.enum(MODEL_IDS).optional().describe('The default model'),
    // Unique items: the route's validator adds uniqueItems (zod arrays have no such rule).
    allowed_models: z.array(z.enum(MODEL_IDS)).min(1).max(MODEL_IDS.length).optional().describe('Distinct model ids'),
    notes: z.string().max(2000).nullable().optional(),
    api_keys: z.array(ApiKeyBody).max(10).optional().describe('Keys to create with the tenant (default: one live key)'),
  })
  .passthrough();

/** PATCH /admin/tenants/:tenantId: activation, limits, models, provider credential pools. */
export const TenantUpdateBody = TenantBody.omit({ tenant_id: true, api_keys: true })
  .partial()
  .extend({ is_active: z.boolean().optional() });

/** POST /admin/auth/login. */
export const AdminLoginBody = z.object({ email: z.string().min(1).max(320), password: z.string().min(1).max(1024) }).passthrough();

/** PATCH /admin/users/:userId. */
export const AdminUserUpdateBody = z
  .object({ display_name: displayName().optional(), role: z.enum(ADMIN_ROLES).optional(), is_active: z.boolean().optional() })
  .passthrough();

/** POST /admin/invitations. */
export const InvitationBody = z
  .object({
    email: email(),
    role: z.enum(ADMIN_ROLES).optional().describe('Default admin'),
    tenant_id: z.string().min(1).max(64).nullable().optional().describe('Restricts the admin to one tenant'),
    expires_in_days: z.number().int().min(1).max(30).optional().describe('Default 7'),
  })
  .passthrough();

/** POST /admin/invitations/:token/accept. */
export const InvitationAcceptBody = z
  .object({ display_name: displayName(), password: z.string().min(12).max(256).describe('12-256 characters') })
  .passthrough();

/** The TypeScript type of a request body or query (for code that does not depend on zod itself). */
export type Infer<T extends z.ZodTypeAny> = z.infer<T>;
