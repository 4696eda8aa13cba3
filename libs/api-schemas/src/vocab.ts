/**
 * The API's vocabulary and limits, defined once (issue 36): the zod schemas of this package and the services' own
 * checks (defence in depth) both import them from here. No imports, so a service loads it without zod, as
 * `@imagegen/api-schemas/vocab`. Error texts stay with their checks; only the values come from here.
 */

/** SPEC 1: the two image providers. */
export const PROVIDERS = ['provA', 'provB'] as const;
export type Provider = (typeof PROVIDERS)[number];

/** The six model ids of SPEC 1 "Models", in the SPEC's order: the one list every service validates against. */
export const MODEL_IDS = [
  'provA-flash-lite-image',
  'provA-flash-image',
  'provA-pro-image',
  'provB-image-2',
  'provB-image-2.5-flare',
  'provB-image-2.5-sunburst',
] as const;
export type ModelId = (typeof MODEL_IDS)[number];
/** SPEC 4.9: the platform's default model (a tenant's model_id default). */
export const DEFAULT_MODEL_ID: ModelId = 'provA-flash-lite-image';

/** A tenant's record as far as its models go (tenancy's Tenant). */
export interface TenantModels {
  modelId?: string;
  allowedModels: readonly string[];
}

/** The models a tenant may generate with: its allowlist (an empty one, from before allowlists, allows every model). */
export const allowedModelsOf = (tenant: TenantModels): readonly string[] =>
  tenant.allowedModels.length > 0 ? tenant.allowedModels : MODEL_IDS;

/** The model a request without model_id uses: the tenant's default, else the platform default, else the first allowed. */
export function defaultModelFor(tenant: TenantModels): string {
  const allowed = allowedModelsOf(tenant);
  const known = (m: string) => (MODEL_IDS as readonly string[]).includes(m);
  if (tenant.modelId && known(tenant.modelId) && allowed.includes(tenant.modelId)) return tenant.modelId;
  if (allowed.includes(DEFAULT_MODEL_ID)) return DEFAULT_MODEL_ID;
  return allowed.find(known) ?? DEFAULT_MODEL_ID;
}

// ---- generation requests (SPEC 4.1; SPEC 8 "Generation and uploads") ----

/** SPEC 4.1: the ratios a request may name. */
export const RATIOS = ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'] as const;
export type Ratio = (typeof RATIOS)[number];
/** SPEC 4.1: the aspect ratio aliases a request may name. */
export const ASPECT_RATIO_ALIASES = ['square', 'portrait', 'landscape'] as const;
export type AspectRatioAlias = (typeof ASPECT_RATIO_ALIASES)[number];
/** The ratio each alias stands for (documented in docs/design/generation.md). */
export const ALIAS_RATIOS: Readonly<Record<AspectRatioAlias, Ratio>> = { square: '1:1', portrait: '3:4', landscape: '4:3' };
/** SPEC 4.1: the aspect ratio aliases and ratios a request may name (saved assets take the same set). */
export const ASPECT_RATIOS = [...ASPECT_RATIO_ALIASES, ...RATIOS] as const;
/** SPEC 4.4: the aspect ratios of POST /api/products/:identifier/generate. */
export const PRODUCT_ASPECT_RATIOS = ['1:1', '16:9', '9:16', '4:3', '3:4'] as const satisfies readonly Ratio[];
/** provA resolution tiers (resolution_tier; the library's resolutionTier filter). */
export const RESOLUTION_TIERS = ['0.5k', '1k', '2k', '4k'] as const;
export type ResolutionTier = (typeof RESOLUTION_TIERS)[number];
/** provB output_format. */
export const OUTPUT_FORMATS = ['png', 'jpeg', 'webp'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];
/** provB quality: every model's values, then those only the 2.5 models take. */
export const STANDARD_QUALITIES = ['low', 'medium', 'high', 'auto'] as const;
export const EXTENDED_QUALITIES = ['xhigh', 'max'] as const;
export const QUALITIES = [...STANDARD_QUALITIES, ...EXTENDED_QUALITIES] as const;
/** provB background. */
export const BACKGROUNDS = ['auto', 'opaque', 'transparent'] as const;
/** provB moderation. */
export const MODERATIONS = ['auto', 'low'] as const;
/** How scene / reference-group images are used (reference_mode; a scene's default_reference_mode). */
export const REFERENCE_MODES = ['style', 'add'] as const;
/** The types upload-for-editing takes (mime_type). */
export const UPLOAD_MIME_TYPES = ['image/png', 'image/jpeg', 'image/webp', 'image/gif'] as const;

/** The prompt of a generation, by provider (characters); the larger applies while the model is unknown. */
export const PROMPT_MAX = { provA: 16_384, provB: 32_000 } as const satisfies Record<Provider, number>;
/** negative_prompt of a generation or edit (and of a style preset, which stands in for it). */
export const NEGATIVE_PROMPT_MAX = 1024;
/** system_instruction of a generation (characters). */
export const SYSTEM_INSTRUCTION_MAX = 4000;
/** Images per request: n, number_of_images. */
export const IMAGES_PER_REQUEST_MAX = 4;
/** provB output_compression: 0 to this (percent). */
export const OUTPUT_COMPRESSION_MAX = 100;
/** provB size WIDTHxHEIGHT: both edges multiples of 16, longest edge, long:short ratio (to 1), pixels in total. */
export const PROVB_SIZE_LIMITS = { multiple: 16, maxEdge: 3840, maxRatio: 3, minPixels: 655_360, maxPixels: 8_294_400 } as const;
/** SPEC 4.1 rule 2: saved assets one request may name. */
export const CHARACTERS_PER_REQUEST_MAX = 5;
export const PRODUCTS_PER_REQUEST_MAX = 6;
export const REFERENCE_GROUPS_PER_REQUEST_MAX = 5;
/** Reference images of one request in total (assets' and the request's), by provider. */
export const REFERENCE_IMAGES_MAX = { provA: 14, provB: 16 } as const satisfies Record<Provider, number>;
/** An application session id: 1-200 characters (session_id, X-Session-Id, the sessionId filter). */
export const SESSION_ID_MAX = 200;
/** Images one session holds (SPEC 8 "Quotas"). */
export const IMAGES_PER_SESSION_MAX = 1000;
/** upload-for-editing: image_url and file_name (characters). */
export const UPLOAD_URL_MAX = 4096;
export const FILE_NAME_MAX = 255;
/** An image fetched from a URL (upload-for-editing, product and scene imports): bytes, and pixels in total. */
export const UPLOAD_MAX_BYTES = 20 * 1024 * 1024;
export const UPLOAD_MAX_PIXELS = 4_194_304;
/** Character and product generation: the scene (characters; its minimum depends on the endpoint) and additional_details. */
export const GENERATE_SCENE_PROMPT_MAX = 1500;
export const CHARACTER_SCENE_PROMPT_MIN = 5;
export const MULTI_CHARACTER_SCENE_PROMPT_MIN = 10;
export const ADDITIONAL_DETAILS_MAX = 500;
/** generate-multi: distinct characters, at least this many (at most CHARACTERS_PER_REQUEST_MAX). */
export const MULTI_CHARACTERS_MIN = 2;

/** Ids travel as int64 over gRPC and are read back as safe integers. */
export const ID_MAX = Number.MAX_SAFE_INTEGER;
/** Paging (limit, offset, page) travels as int32 over gRPC. */
export const INT32_MAX = 2_147_483_647;

/** SPEC 4.11 and 6: the quota events (the only ones a webhook could subscribe to before issue 37). */
export const QUOTA_EVENTS = ['quota.warning', 'quota.exceeded'] as const;
/** The generation outcomes a webhook can subscribe to (generation's ExecutionFinished, by its status). */
export const GENERATION_EVENTS = ['generation.completed', 'generation.failed', 'generation.cancelled'] as const;
/** The image events a webhook can subscribe to (library's ImageStored and ImageDeleted). */
export const IMAGE_EVENTS = ['image.stored', 'image.deleted'] as const;
/** Every event type a webhook endpoint can subscribe to (issue 37); an endpoint gets all of them by default. */
export const WEBHOOK_EVENT_TYPES = [...GENERATION_EVENTS, ...IMAGE_EVENTS, ...QUOTA_EVENTS] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** The twelve OAuth scopes of SPEC 5, with the wording the sign-in page shows. Issued by oauth, checked by mcp. */
export const SCOPES = {
  'images:generate': 'Generate new images',
  'images:edit': 'Edit images and upload images for editing',
  'images:read': 'View your images',
  'images:delete': 'Delete images',
  'characters:manage': 'Create, change and delete characters',
  'characters:read': 'View characters',
  'products:manage': 'Create, change and delete products',
  'products:read': 'View products',
  'styles:manage': 'Create, change and delete style presets and scenes',
  'styles:read': 'View style presets and scenes',
  'sessions:read': 'View sessions and execution logs',
  'analytics:read': 'View usage, quota and profile',
} as const;
export type Scope = keyof typeof SCOPES;

/** SPEC 2: the roles of an admin user. */
export const ADMIN_ROLES = ['admin', 'super_admin'] as const;

// ---- saved assets (SPEC 4.2-4.6; SPEC 8 "Text and collection limits") ----

/** Characters (SPEC 4.2): characters. */
export const CHARACTER_NAME_MAX = 100;
export const CHARACTER_DESCRIPTION_MAX = 500;
export const BASE_PROMPT_MIN = 10;
export const BASE_PROMPT_MAX = 2000;
export const CHARACTER_NEGATIVE_PROMPT_MAX = 1000;
export const CHARACTER_SYSTEM_INSTRUCTION_MAX = 1000;
/** reference_image_ids of a character (items). */
export const CHARACTER_REFERENCE_IMAGES_MAX = 10;
/** Tags of a character or scene (items), and of any tag (characters; products' too). */
export const TAGS_MAX = 20;
export const TAG_MAX = 50;
/** Products (SPEC 4.4): characters. */
export const PRODUCT_NAME_MAX = 100;
export const PRODUCT_DESCRIPTION_MAX = 500;
/** Style presets (SPEC 4.3): characters. */
export const STYLE_PRESET_NAME_MAX = 128;
export const STYLE_PRESET_PROMPT_MAX = 2048;
export const STYLE_PRESET_NEGATIVE_PROMPT_MAX = NEGATIVE_PROMPT_MAX;
export const STYLE_PRESET_SYSTEM_INSTRUCTION_MAX = 512;
/** Scenes (SPEC 4.5): characters, and reference images (ids and URLs combined). */
export const SCENE_NAME_MAX = 100;
export const SCENE_DESCRIPTION_MAX = 500;
export const SCENE_PROMPT_MAX = 4000;
export const SCENE_REFERENCES_MAX = 20;
/** A reference image URL of a scene (characters). */
export const REFERENCE_URL_MAX = 2048;
/** Search presets (SPEC 4.6): the name (characters). */
export const SEARCH_PRESET_NAME_MAX = 50;
/** A search term (images, characters, scenes, products; a search preset's filter): characters. */
export const SEARCH_QUERY_MAX = 200;
/** sort_by of the named-asset lists (characters, scenes). */
export const ASSET_SORTS = ['name', 'created', 'used', 'recent'] as const;

// ---- the image library and lists (SPEC 4.1, 4.7, 4.8) ----

/** sortBy of the gallery and of a search preset. */
export const IMAGE_SORTS = ['newest', 'oldest', 'largest', 'smallest'] as const;
/** searchMode of the gallery and of a search preset. */
export const SEARCH_MODES = ['exact', 'all', 'any'] as const;
/** Gallery filters: aspectRatio, operationType and resolutionTier (characters). */
export const ASPECT_RATIO_FILTER_MAX = 20;
export const OPERATION_TYPE_FILTER_MAX = 50;
export const RESOLUTION_TIER_FILTER_MAX = 50;
/** Ids of one bulk delete, and of one ZIP download. */
export const MAX_BULK_DELETE = 20;
export const MAX_DOWNLOAD_IDS = 100;
/** Page sizes: every list's maximum, the default of images, sessions and products, of characters, scenes, style presets. */
export const LIST_LIMIT_MAX = 100;
export const LIST_LIMIT_DEFAULT = 20;
export const ASSET_LIST_LIMIT_DEFAULT = 50;
/** A keyset list's `cursor` (characters). */
export const CURSOR_MAX = 2000;
/** A session's execution logs, and the active executions: default and maximum. */
export const SESSION_LOGS_LIMIT_DEFAULT = 50;
export const SESSION_LOGS_LIMIT_MAX = 200;
export const ACTIVE_EXECUTIONS_LIMIT_DEFAULT = 100;
export const ACTIVE_EXECUTIONS_LIMIT_MAX = 200;
/** GET /api/usage: months, default and maximum. */
export const USAGE_MONTHS_DEFAULT = 12;
export const USAGE_MONTHS_MAX = 24;

// ---- webhooks (SPEC 4.11) ----

/** An endpoint's url and description (characters), and its events (items). */
export const WEBHOOK_URL_MAX = 2048;
export const WEBHOOK_DESCRIPTION_MAX = 200;
export const WEBHOOK_EVENTS_MAX = 10;
/** Endpoints of one tenant. */
export const WEBHOOKS_PER_TENANT_MAX = 10;
/** An endpoint's deliveries list: default and maximum page size. */
export const WEBHOOK_DELIVERIES_LIMIT_DEFAULT = 50;
export const WEBHOOK_DELIVERIES_LIMIT_MAX = 200;

// ---- limits of tenancy (SPEC 4.9) ----

/** A tenant id: 1-64 characters. */
export const TENANT_ID_MAX = 64;
/** A tenant's name: 1-200 characters. */
export const TENANT_NAME_MAX = 200;
/** An email address (contact, admin user, invitation): at most 320 characters. */
export const EMAIL_MAX = 320;
/** A tenant's notes: at most 2,000 characters. */
export const TENANT_NOTES_MAX = 2000;
/** An API key's name: 1-100 characters, unique per tenant. */
export const KEY_NAME_MAX = 100;
/** An admin user's display name: 1-100 characters. */
export const DISPLAY_NAME_MAX = 100;
/** The types of an API key (its sk_live_ / sk_test_ prefix); a new key is live unless told. */
export const API_KEY_TYPES = ['live', 'test'] as const;
/** Active API keys of one tenant (and api_keys of POST /admin/tenants): at most 10. */
export const API_KEYS_PER_TENANT_MAX = 10;
/**
 * Signed requests (SPEC 5.8, extension): X-Timestamp may be at most 5 minutes from the server's clock, either way;
 * a signature is refused when seen again within that window.
 */
export const SIGNATURE_MAX_SKEW_MS = 5 * 60_000;
/** The grace period of a rotated signing secret, when the rotation names one: 0 (none) to 7 days, in seconds. */
export const SIGNING_GRACE_SECONDS_MAX = 7 * 86_400;
/** A provider credential pool: at most 5 keys per provider. */
export const PROVIDER_POOL_KEYS_MAX = 5;
/** One provider key: 1-1000 characters. */
export const PROVIDER_KEY_MAX = 1000;
/** An admin user's password: at least 12 characters. */
export const PASSWORD_MIN = 12;
/** An admin user's password: at most 256 characters. */
export const PASSWORD_MAX = 256;
/** An invitation's lifetime: 1-30 days. */
export const INVITATION_DAYS_MAX = 30;
/** An invitation's lifetime when none is given: 7 days. */
export const INVITATION_DAYS_DEFAULT = 7;
/** GET /admin/audit-log: records a page (default 50, at most 200). */
export const AUDIT_LOG_LIMIT_DEFAULT = 50;
export const AUDIT_LOG_LIMIT_MAX = 200;
/** GET /admin/audit-log: an actor, action or tenant filter, at most 200 characters. */
export const AUDIT_FILTER_MAX = 200;
/** A new tenant's monthly quota when none is given: 10,240 MB. */
export const TENANT_MONTHLY_QUOTA_MB_DEFAULT = 10240;
/** A new tenant's rate limit when none is given: 60 requests a minute. */
export const TENANT_RATE_LIMIT_PER_MINUTE_DEFAULT = 60;
