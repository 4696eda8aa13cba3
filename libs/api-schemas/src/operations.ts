import { z } from 'zod';
import { AssetPagination, Deleted, data, PagePagination, StylePresetPagination, Success } from './common.js';
import * as P from './params.js';
import * as B from './requests.js';
import * as R from './resources.js';
import {
  MAX_BULK_DELETE,
  MAX_DOWNLOAD_IDS,
  type Scope,
  SEARCH_PRESET_NAME_MAX,
  WEBHOOK_EVENT_TYPES,
  WEBHOOKS_PER_TENANT_MAX,
} from './vocab.js';

/**
 * Every REST and admin operation of the gateway, once: its operationId, tag, summary, credential, its request
 * (path parameters, query and body as the route validates them) and its answers, from the shapes of params.ts,
 * requests.ts and resources.ts. The gateway's routes take their validation from here (operation-policy.ts), the
 * OpenAPI document is built from this catalogue alone (openapi/document.ts: `buildOpenapiDocument()`, served at
 * /docs/json and written to libs/client by `pnpm client`), and the end-to-end suite checks every answer against it.
 * The order is the document's: paths in the order of their first operation here.
 */

export type OperationAuth = 'none' | 'tenant' | 'admin' | 'super_admin';

/**
 * How the route validates its `body` before the handler runs:
 * - absent: every rule, `wireSchema(body)` (and `bodyRules`); the document shows that very schema;
 * - 'types': the JSON types only (`typesOnly`): the service checks every rule and reports every problem at once
 *   with the SPEC's texts (REST and MCP alike);
 * - a zod schema: that one's wire form, a `checkedByService` variant of `body` whose service checks some fields' rules;
 * - 'none': nothing; the route checks the body itself (its problems carry a SPEC 7 text of their own).
 * In the last three cases the document shows `body` with every rule.
 */
export type BodyValidation = 'types' | 'none' | z.ZodTypeAny;

export interface OperationSpec {
  operationId: string;
  tag: string;
  /** One line for the document. */
  summary: string;
  /** More for the document, when a line is not enough. */
  description?: string;
  /** Who may call it: nobody signed in, a tenant (API key), an admin user or the admin token, a super_admin. */
  auth: OperationAuth;
  /**
   * Tenant operations: the OAuth scopes a token needs to do this over MCP (every tool that does it requires them);
   * an API key holds every scope.
   */
  scopes?: Scope[];
  /** POST that creates or bills: an Idempotency-Key makes retries safe (the gateway keeps the first answer). */
  idempotent?: boolean;
  /** The tenant rate-limit bucket it counts in besides every request's 'api' bucket (SPEC 8). */
  rate?: 'generation' | 'upload';
  /** The path parameters (every `:name` of the key), validated as `wireSchema(params)` (coerced from strings). */
  params?: z.ZodTypeAny;
  /** The query, validated as `wireSchema(query)` (coerced from strings; unknown parameters are ignored). */
  query?: z.ZodTypeAny;
  /** The JSON body with every rule; `validate` says how the route checks it. */
  body?: z.ZodTypeAny;
  validate?: BodyValidation;
  /** JSON Schema keywords zod cannot state (uniqueItems, minProperties), merged into the validated `wireSchema(body)`. */
  bodyRules?: Record<string, unknown>;
  /** The success answer: its status, its JSON body (or another media type). */
  ok: { status: number; description: string; schema?: z.ZodTypeAny; media?: 'application/zip' | 'text/event-stream' };
  /** Error statuses this operation answers besides the ones every operation of its kind does (see openapi/responses.ts). */
  errors?: number[];
  /** Answers an ETag and, to a request whose If-None-Match holds it, 304 Not Modified without a body. */
  conditional?: boolean;
  /** Stores images, so the storage quota applies (402 QUOTA_EXCEEDED). */
  bills?: boolean;
  /** Calls an image provider or fetches a URL (502, 504). */
  upstream?: boolean;
  /**
   * Extension (issue 37): with `Prefer: respond-async` it answers 202 JobAccepted at once, with Location and
   * Preference-Applied, and runs as a queued job; GET /api/executions/:executionId then carries its result.
   */
  async?: boolean;
}

const list = <T extends z.ZodTypeAny>(item: T, pagination: z.ZodTypeAny) => z.object({ data: z.array(item), pagination });
const flat = <T extends z.ZodRawShape>(shape: T) => z.object(shape);

const ok = (schema: z.ZodTypeAny, description = 'OK', status = 200) => ({ status, description, schema });

const CATALOGUE = {
  // ---- health ----
  'GET /health': {
    operationId: 'getHealth',
    tag: 'Health',
    summary: 'Liveness of the gateway, and the version and commit it runs',
    auth: 'none',
    ok: ok(R.Health, 'The gateway is up'),
  },

  // ---- characters (SPEC 4.2) ----
  'GET /api/characters': {
    operationId: 'listCharacters',
    tag: 'Characters',
    summary: 'List characters',
    auth: 'tenant',
    scopes: ['characters:read'],
    query: B.AssetListQuery,
    ok: ok(list(R.CharacterListItem, AssetPagination)),
  },
  'POST /api/characters': {
    operationId: 'createCharacter',
    tag: 'Characters',
    summary: 'Create a character',
    auth: 'tenant',
    scopes: ['characters:manage'],
    idempotent: true,
    body: B.CharacterBody,
    validate: B.CharacterInput,
    ok: ok(data(R.Character)),
    errors: [409],
  },
  'GET /api/characters/:identifier': {
    operationId: 'getCharacter',
    tag: 'Characters',
    summary: 'Get a character by id or name',
    auth: 'tenant',
    scopes: ['characters:read'],
    params: P.IdentifierParams,
    ok: ok(data(R.Character)),
  },
  'PATCH /api/characters/:identifier': {
    operationId: 'updateCharacter',
    tag: 'Characters',
    summary: 'Update a character (only given fields change; reference_image_ids and tags replace)',
    auth: 'tenant',
    scopes: ['characters:manage'],
    params: P.IdentifierParams,
    body: B.CharacterUpdateBody,
    validate: B.CharacterUpdateInput,
    ok: ok(data(R.Character)),
    errors: [409],
  },
  'DELETE /api/characters/:identifier': {
    operationId: 'deleteCharacter',
    tag: 'Characters',
    summary: 'Delete a character (generated images keep their character_id)',
    auth: 'tenant',
    scopes: ['characters:manage'],
    params: P.IdentifierParams,
    ok: ok(data(Deleted)),
  },
  'POST /api/characters/generate-multi': {
    operationId: 'generateMultiCharacterImage',
    tag: 'Characters',
    summary: 'Generate one image with 2-5 characters',
    auth: 'tenant',
    scopes: ['images:generate', 'characters:read'],
    idempotent: true,
    rate: 'generation',
    body: B.MultiCharacterGenerateBody,
    ok: ok(data(R.MultiCharacterResult)),
    bills: true,
    upstream: true,
    async: true,
    errors: [404],
  },
  'POST /api/characters/:identifier/generate': {
    operationId: 'generateCharacterImage',
    tag: 'Characters',
    summary: 'Generate an image of a character (id or URL-encoded name)',
    auth: 'tenant',
    scopes: ['images:generate', 'characters:read'],
    idempotent: true,
    rate: 'generation',
    params: P.IdentifierParams,
    body: B.CharacterGenerateBody,
    ok: ok(data(R.CharacterGenerateResult)),
    bills: true,
    upstream: true,
    async: true,
  },

  // ---- products (SPEC 4.4) ----
  'GET /api/products': {
    operationId: 'listProducts',
    tag: 'Products',
    summary: 'List products (page/page_size)',
    auth: 'tenant',
    scopes: ['products:read'],
    query: B.ProductListQuery,
    ok: ok(list(R.Product, PagePagination)),
  },
  'POST /api/products': {
    operationId: 'createProduct',
    tag: 'Products',
    summary: 'Create a product from a public image URL',
    auth: 'tenant',
    scopes: ['products:manage'],
    idempotent: true,
    body: B.ProductBody,
    ok: ok(data(R.ProductCreated)),
    bills: true,
    upstream: true,
    errors: [409],
  },
  'GET /api/products/:identifier': {
    operationId: 'getProduct',
    tag: 'Products',
    summary: 'Get a product by id or name',
    auth: 'tenant',
    scopes: ['products:read'],
    params: P.IdentifierParams,
    ok: ok(data(R.ProductDetail)),
  },
  'PATCH /api/products/:identifier': {
    operationId: 'updateProduct',
    tag: 'Products',
    summary: 'Update a product',
    auth: 'tenant',
    scopes: ['products:manage'],
    params: P.IdentifierParams,
    body: B.ProductUpdateBody,
    ok: ok(data(R.ProductUpdated)),
    errors: [409],
  },
  'DELETE /api/products/:identifier': {
    operationId: 'deleteProduct',
    tag: 'Products',
    summary: 'Delete a product and its stored image (generated images stay)',
    auth: 'tenant',
    scopes: ['products:manage'],
    params: P.IdentifierParams,
    ok: ok(data(Deleted)),
  },
  'POST /api/products/:identifier/generate': {
    operationId: 'generateProductImage',
    tag: 'Products',
    summary: 'Generate 1-4 images featuring a product',
    auth: 'tenant',
    scopes: ['images:generate', 'products:read'],
    idempotent: true,
    rate: 'generation',
    params: P.IdentifierParams,
    body: B.ProductGenerateBody,
    ok: ok(data(R.ProductGenerateResult)),
    bills: true,
    upstream: true,
    async: true,
  },

  // ---- scenes (SPEC 4.5) ----
  'GET /api/scenes': {
    operationId: 'listScenes',
    tag: 'Scenes',
    summary: 'List scene presets',
    auth: 'tenant',
    scopes: ['styles:read'],
    query: B.AssetListQuery,
    ok: ok(list(R.SceneListItem, AssetPagination)),
  },
  'POST /api/scenes': {
    operationId: 'createScene',
    tag: 'Scenes',
    summary: 'Create a scene preset (prompt and/or reference images; URLs are fetched and imported)',
    auth: 'tenant',
    scopes: ['styles:manage'],
    idempotent: true,
    // Checked by the route ('Invalid scene preset payload', SPEC 7) and by the library service.
    body: B.SceneBody,
    validate: 'none',
    ok: ok(data(R.Scene)),
    bills: true,
    upstream: true,
    errors: [409],
  },
  'GET /api/scenes/:identifier': {
    operationId: 'getScene',
    tag: 'Scenes',
    summary: 'Get a scene preset by id or URL-encoded name',
    auth: 'tenant',
    scopes: ['styles:read'],
    params: P.IdentifierParams,
    ok: ok(data(R.Scene)),
  },
  'PATCH /api/scenes/:identifier': {
    operationId: 'updateScene',
    tag: 'Scenes',
    summary: 'Update a scene preset (nullable fields clear; reference_image_ids and tags replace; URLs are added)',
    auth: 'tenant',
    scopes: ['styles:manage'],
    params: P.IdentifierParams,
    body: B.SceneUpdateBody,
    validate: 'none',
    ok: ok(data(R.Scene)),
    bills: true,
    upstream: true,
    errors: [409],
  },
  'DELETE /api/scenes/:identifier': {
    operationId: 'deleteScene',
    tag: 'Scenes',
    summary: 'Delete a scene preset (its reference images stay in the library)',
    auth: 'tenant',
    scopes: ['styles:manage'],
    params: P.IdentifierParams,
    ok: ok(data(R.SceneDeleted)),
  },

  // ---- style presets (SPEC 4.3) ----
  'GET /api/style-presets': {
    operationId: 'listStylePresets',
    tag: 'Style presets',
    summary: 'List style presets',
    auth: 'tenant',
    scopes: ['styles:read'],
    query: B.StylePresetListQuery,
    ok: ok(list(R.StylePreset, StylePresetPagination)),
  },
  'POST /api/style-presets': {
    operationId: 'createStylePreset',
    tag: 'Style presets',
    summary: 'Create a style preset',
    auth: 'tenant',
    scopes: ['styles:manage'],
    idempotent: true,
    body: B.StylePresetBody,
    validate: B.StylePresetRestInput,
    ok: ok(data(R.StylePreset)),
    errors: [409],
  },
  'GET /api/style-presets/:id': {
    operationId: 'getStylePreset',
    tag: 'Style presets',
    summary: 'Get a style preset',
    auth: 'tenant',
    scopes: ['styles:read'],
    params: P.IdParams,
    ok: ok(data(R.StylePreset)),
  },
  'PATCH /api/style-presets/:id': {
    operationId: 'updateStylePreset',
    tag: 'Style presets',
    summary: 'Update a style preset (new_name renames; null clears prompt, negative_prompt, system_instruction, aspect_ratio)',
    auth: 'tenant',
    scopes: ['styles:manage'],
    params: P.IdParams,
    body: B.StylePresetUpdateBody,
    validate: B.StylePresetRestUpdateInput,
    ok: ok(data(R.StylePreset)),
    errors: [409],
  },
  'DELETE /api/style-presets/:id': {
    operationId: 'deleteStylePreset',
    tag: 'Style presets',
    summary: 'Delete a style preset',
    auth: 'tenant',
    scopes: ['styles:manage'],
    params: P.IdParams,
    ok: ok(data(Deleted)),
  },

  // ---- search presets (SPEC 4.6) ----
  'GET /api/search-presets': {
    operationId: 'listSearchPresets',
    tag: 'Search presets',
    summary: 'List gallery search presets',
    auth: 'tenant',
    scopes: ['images:read'],
    ok: ok(data(z.array(R.SearchPreset))),
  },
  'POST /api/search-presets': {
    operationId: 'createSearchPreset',
    tag: 'Search presets',
    summary: 'Save a gallery search preset',
    description:
      `Body: {presetName (1-${SEARCH_PRESET_NAME_MAX}), filters: ` +
      '{ {search, searchMode (exact|all|any), dateFrom, dateTo, aspectRatio, ' +
      'operationType (generate|edit), minSize, maxSize, sessionId, hasNegativePrompt, sortBy (newest|oldest|largest|smallest)}}',
    auth: 'tenant',
    scopes: ['images:read'],
    idempotent: true,
    // Checked by the route and the service, with SPEC 7's texts for every problem.
    body: B.SearchPresetBody,
    validate: 'none',
    ok: ok(data(R.SearchPreset)),
    errors: [409],
  },
  'DELETE /api/search-presets/:id': {
    operationId: 'deleteSearchPreset',
    tag: 'Search presets',
    summary: 'Delete a search preset',
    auth: 'tenant',
    scopes: ['images:read'],
    params: P.IdParams,
    ok: ok(data(Deleted)),
  },
  'GET /api/search-presets/:id/images': {
    operationId: 'listSearchPresetImages',
    tag: 'Search presets',
    summary: "Run a saved search preset against the image list (same shape as GET /api/images, sorted by the preset's sortBy)",
    auth: 'tenant',
    scopes: ['images:read'],
    params: P.IdParams,
    query: B.SearchPresetImagesQuery,
    ok: ok(z.object({ data: z.array(R.Image), pagination: R.ImagePagination, preset: R.SearchPreset }), 'The images the preset finds'),
  },

  // ---- the image library (SPEC 4.1; generating and editing below) ----
  'GET /api/images': {
    operationId: 'listImages',
    tag: 'Images',
    summary: 'List images, newest first, with filters',
    auth: 'tenant',
    scopes: ['images:read'],
    query: B.ImageListQuery,
    ok: ok(list(R.Image, R.ImagePagination), 'A page of images, newest first'),
  },
  'GET /api/images/:id': {
    operationId: 'getImage',
    tag: 'Images',
    summary: 'Image detail with edit history',
    auth: 'tenant',
    scopes: ['images:read'],
    params: P.ImageIdParams,
    ok: ok(data(R.ImageDetail), 'The image with its edit history'),
  },
  'GET /api/images/:id/credentials': {
    operationId: 'getImageCredentials',
    tag: 'Images',
    summary: "The image's Content Credentials: its whole C2PA manifest store, validated against the trust anchors (extension)",
    auth: 'tenant',
    scopes: ['images:read'],
    params: P.ImageIdParams,
    ok: ok(data(R.ImageCredentials), 'The manifest store and its validation'),
  },
  'DELETE /api/images/:id': {
    operationId: 'deleteImage',
    tag: 'Images',
    summary: 'Delete an image and its files (edits keep parent_image_id)',
    auth: 'tenant',
    scopes: ['images:delete'],
    params: P.ImageIdParams,
    ok: { status: 204, description: 'Deleted (no body)' },
  },
  'POST /api/images/delete-bulk': {
    operationId: 'deleteImages',
    tag: 'Images',
    summary: `Delete up to ${MAX_BULK_DELETE} images; per-id failures are reported`,
    auth: 'tenant',
    scopes: ['images:delete'],
    body: B.DeleteImagesBody,
    ok: ok(data(R.BulkDeleteResult), 'Per-id results'),
  },
  'POST /api/images/download': {
    operationId: 'downloadImages',
    tag: 'Images',
    summary: `ZIP of the originals of up to ${MAX_DOWNLOAD_IDS} images`,
    auth: 'tenant',
    scopes: ['images:read'],
    body: B.DownloadImagesBody,
    ok: { status: 200, description: 'ZIP of the originals (image-<id>.<ext>)', media: 'application/zip' },
    errors: [404],
  },

  // ---- sessions (SPEC 4.8; their logs and executions below) ----
  'GET /api/sessions': {
    operationId: 'listSessions',
    tag: 'Sessions',
    summary: 'List sessions, most recently active first',
    auth: 'tenant',
    scopes: ['sessions:read'],
    query: B.SessionListQuery,
    ok: ok(list(R.SessionSummary, R.ImagePagination)),
  },
  'GET /api/sessions/:sessionId': {
    operationId: 'getSession',
    tag: 'Sessions',
    summary: 'A session record and its images (oldest first)',
    auth: 'tenant',
    scopes: ['sessions:read'],
    params: P.SessionParams,
    ok: ok(data(z.object({ session: R.SessionRecord, images: z.array(R.SessionImage) }))),
    conditional: true,
  },

  // ---- administration (SPEC 4.9) ----
  'GET /admin/tenants': {
    operationId: 'listTenants',
    tag: 'Admin',
    summary: 'List tenants',
    auth: 'admin',
    ok: ok(data(z.array(R.Tenant))),
  },
  'POST /admin/tenants': {
    operationId: 'createTenant',
    tag: 'Admin',
    summary: 'Create a tenant (returns the full API keys once)',
    auth: 'super_admin',
    body: B.TenantBody,
    bodyRules: { properties: { allowed_models: { uniqueItems: true } } },
    ok: ok(data(R.TenantCreated)),
    errors: [409],
  },
  'GET /admin/tenants/:tenantId': {
    operationId: 'getTenant',
    tag: 'Admin',
    summary: 'Get a tenant with its API keys',
    auth: 'admin',
    params: P.TenantParams,
    ok: ok(data(R.TenantDetail)),
  },
  'PATCH /admin/tenants/:tenantId': {
    operationId: 'updateTenant',
    tag: 'Admin',
    summary: 'Update a tenant (activation, limits, models, provider credential pools)',
    auth: 'super_admin',
    params: P.TenantParams,
    body: B.TenantUpdateBody,
    bodyRules: { properties: { allowed_models: { uniqueItems: true } } },
    ok: ok(data(R.TenantDetail)),
    // 409: activating a tenant whose purge started (issue 40, item 4).
    errors: [409],
  },
  'POST /admin/tenants/:tenantId/api-keys': {
    operationId: 'createApiKey',
    tag: 'Admin',
    summary: 'Create an API key (the full key is returned once)',
    auth: 'super_admin',
    params: P.TenantParams,
    body: B.ApiKeyBody,
    ok: ok(data(R.CreatedApiKey), 'The new key (its full value is shown once)'),
    errors: [409],
  },
  'DELETE /admin/tenants/:tenantId/api-keys/:keyRef': {
    operationId: 'revokeApiKey',
    tag: 'Admin',
    summary: 'Revoke an API key by key id (key_...) or key name; effective within seconds',
    auth: 'super_admin',
    params: P.ApiKeyParams,
    ok: ok(data(z.object({ success: z.literal(true), key: R.ApiKeyRecord }))),
  },
  'POST /admin/tenants/:tenantId/api-keys/:keyRef/signing': {
    operationId: 'setApiKeySigning',
    tag: 'Admin',
    summary: 'Require signed requests (X-Signature, X-Timestamp) for an API key, or no longer (extension)',
    description:
      'Turning it on answers the signing secret, this once (on a key already signed, the state without it: rotate for a new ' +
      'secret); turning it off forgets the secrets. A signed key is refused by MCP and the OAuth sign-in, which cannot ' +
      'verify signatures. The rules and the signed string: README, "Signed requests".',
    auth: 'super_admin',
    params: P.ApiKeyParams,
    body: B.ApiKeySigningBody,
    ok: ok(data(R.ApiKeySigning), "The key's signing state (signingSecret only when it was made by this request)"),
  },
  'POST /admin/tenants/:tenantId/api-keys/:keyRef/signing/rotate': {
    operationId: 'rotateApiKeySigningSecret',
    tag: 'Admin',
    summary: "Rotate an API key's signing secret; the previous one is still accepted for a grace period (extension)",
    description: 'The new secret is answered this once. 409 when the key does not require signed requests.',
    auth: 'super_admin',
    params: P.ApiKeyParams,
    body: B.ApiKeySigningRotateBody,
    ok: ok(data(R.ApiKeySigning), 'The new signing secret (shown once) and until when the previous one is accepted'),
    errors: [409],
  },
  'POST /admin/auth/login': {
    operationId: 'adminLogin',
    tag: 'Admin',
    summary: 'Sign in with email and password; returns a session token for Authorization: Bearer',
    auth: 'none',
    body: B.AdminLoginBody,
    ok: ok(data(R.AdminSession), 'A session token (use as Authorization: Bearer)'),
    errors: [401, 423],
  },
  'POST /admin/auth/logout': {
    operationId: 'adminLogout',
    tag: 'Admin',
    summary: 'Revoke the current admin session token',
    auth: 'admin',
    ok: ok(data(Success)),
  },
  'GET /admin/me': { operationId: 'getAdminMe', tag: 'Admin', summary: 'Who is signed in', auth: 'admin', ok: ok(data(R.AdminMe)) },
  'GET /admin/users': {
    operationId: 'listAdminUsers',
    tag: 'Admin',
    summary: 'List admin users',
    auth: 'admin',
    ok: ok(data(z.array(R.AdminUser))),
  },
  'GET /admin/users/:userId': {
    operationId: 'getAdminUser',
    tag: 'Admin',
    summary: 'Get an admin user',
    auth: 'admin',
    params: P.UserParams,
    ok: ok(data(R.AdminUser)),
  },
  'PATCH /admin/users/:userId': {
    operationId: 'updateAdminUser',
    tag: 'Admin',
    summary: 'Change display name, role or active state (deactivation ends the user sessions at once)',
    auth: 'super_admin',
    params: P.UserParams,
    body: B.AdminUserUpdateBody,
    ok: ok(
      data(
        z.object({
          user: R.AdminUser.pick({ userId: true, email: true, displayName: true, role: true, isActive: true, updatedAt: true }),
        }),
      ),
    ),
    errors: [409],
  },
  'POST /admin/users/:userId/unlock': {
    operationId: 'unlockAdminUser',
    tag: 'Admin',
    summary: 'Unlock a user locked by failed sign-ins (failed attempts reset to 0)',
    auth: 'super_admin',
    params: P.UserParams,
    ok: ok(data(z.object({ success: z.literal(true), userId: z.string(), message: z.string() }))),
  },
  'GET /admin/invitations': {
    operationId: 'listInvitations',
    tag: 'Admin',
    summary: 'List invitations (optionally by status); tokens in full for super_admin only',
    auth: 'admin',
    query: P.InvitationListQuery,
    ok: ok(data(z.array(R.Invitation))),
  },
  'POST /admin/invitations': {
    operationId: 'createInvitation',
    tag: 'Admin',
    summary: 'Invite an admin by email; returns an inv_ token',
    auth: 'super_admin',
    body: B.InvitationBody,
    ok: ok(data(R.InvitationCreated)),
    errors: [404, 409],
  },
  'DELETE /admin/invitations/:token': {
    operationId: 'revokeInvitation',
    tag: 'Admin',
    summary: 'Revoke a pending invitation',
    auth: 'super_admin',
    params: P.InvitationParams,
    ok: ok(data(Success)),
    errors: [409],
  },
  'GET /admin/invitations/:token': {
    operationId: 'getInvitation',
    tag: 'Admin',
    summary: 'Public: what a pending invitation is for (the token is the credential)',
    auth: 'none',
    params: P.InvitationParams,
    ok: ok(data(R.InvitationPublic), 'What an invitation offers (no credential: the token is the secret)'),
    errors: [410],
  },
  'POST /admin/invitations/:token/accept': {
    operationId: 'acceptInvitation',
    tag: 'Admin',
    summary: 'Accept an invitation: creates the admin user and signs in',
    auth: 'none',
    params: P.InvitationParams,
    body: B.InvitationAcceptBody,
    ok: ok(data(R.AdminSession), 'The new admin user, signed in'),
    errors: [409, 410],
  },
  'GET /admin/audit-log': {
    operationId: 'listAuditLog',
    tag: 'Admin',
    summary: 'The audit log: every admin write and every tenant security write, newest first (extension, issue 40)',
    description:
      'Filters by actor, tenant, action and time range (from inclusive, to exclusive), keyset-paged with cursor. ' +
      'Records are append-only: no operation changes or deletes one; AUDIT_LOG_RETENTION_DAYS (default 400, 0 keeps ' +
      'them forever) sets how long they are kept.',
    auth: 'admin',
    query: P.AuditLogQuery,
    ok: ok(z.object({ data: z.array(R.AuditRecord), pagination: R.AuditLogPagination })),
  },
  'GET /admin/stats': {
    operationId: 'getAdminStats',
    tag: 'Admin',
    summary: 'Platform totals: tenants, images and storage, recent activity, top tenants, service health',
    auth: 'admin',
    ok: ok(data(R.AdminStats)),
  },

  // ---- generating and editing images (SPEC 4.1) ----
  'POST /api/images': {
    operationId: 'generateImages',
    tag: 'Images',
    summary: 'Generate images from a prompt (or edit one with image_to_edit_id)',
    description:
      'Returns {data:{images, metadata:{requested, generated, session_id}, executionId}}. Provider safety blocks answer 400 ' +
      "'Content blocked by provider safety filters: <reason>'; an open provider circuit answers 503; 402 when the monthly quota is used up.",
    auth: 'tenant',
    scopes: ['images:generate'],
    idempotent: true,
    rate: 'generation',
    // The generation service checks every rule, so one 400 lists every problem (REST and MCP alike); ids keep their
    // int64 wire bounds, counts are clamped to int32 by the mapping (libs/operations requests.ts).
    body: B.GenerateImagesBody,
    validate: 'types',
    ok: ok(data(R.GenerateResult), 'The generated images'),
    bills: true,
    upstream: true,
    async: true,
    errors: [404],
  },
  'POST /api/edit-image': {
    operationId: 'editImage',
    tag: 'Images',
    summary: 'Edit a stored image with a prompt; the result keeps the source shape unless aspect_ratio is given',
    auth: 'tenant',
    scopes: ['images:edit'],
    idempotent: true,
    rate: 'generation',
    body: B.EditImageBody,
    validate: 'types',
    ok: ok(R.EditResult, 'The edited image (flat object)'),
    bills: true,
    upstream: true,
    async: true,
    errors: [404],
  },
  'POST /api/upload-for-editing': {
    operationId: 'uploadForEditing',
    tag: 'Images',
    summary: 'Fetch a public image URL into the library so it can be edited',
    description:
      'PNG, JPEG, WebP or single-frame GIF; at most 20 MB and 4,194,304 pixels. Private, loopback, link-local and metadata ' +
      'addresses are refused (also after redirects and DNS resolution).',
    auth: 'tenant',
    scopes: ['images:edit'],
    idempotent: true,
    rate: 'upload',
    body: B.UploadForEditingBody,
    validate: 'types',
    ok: ok(R.UploadResult, 'The stored upload (flat object)'),
    bills: true,
    upstream: true,
  },

  // ---- session logs and executions (SPEC 4.8) ----
  'GET /api/sessions/:sessionId/logs': {
    operationId: 'listSessionLogs',
    tag: 'Sessions',
    summary: "A session's executions (tool execution logs), newest first, with their log entries",
    auth: 'tenant',
    scopes: ['sessions:read'],
    params: P.SessionParams,
    query: B.SessionLogsQuery,
    ok: ok(
      flat({
        success: z.literal(true),
        sessionId: z.string(),
        executions: z.array(R.ExecutionDetail),
        total: z.number().int(),
        totalIsExact: z.boolean(),
      }),
    ),
  },
  'GET /api/sessions/:sessionId/logs/stream': {
    operationId: 'streamSessionLogs',
    tag: 'Sessions',
    summary: "Server-sent events for the session's active executions",
    description: 'Events: log, status, complete, error, heartbeat. Polls every `interval` ms (default 1000).',
    auth: 'tenant',
    scopes: ['sessions:read'],
    params: P.SessionParams,
    query: P.StreamQuery,
    ok: { status: 200, description: 'SSE: log, status, complete, error and heartbeat events', media: 'text/event-stream' },
  },
  'GET /api/executions/active': {
    operationId: 'listActiveExecutions',
    tag: 'Executions',
    summary: "The tenant's running executions, newest first",
    auth: 'tenant',
    scopes: ['sessions:read'],
    query: B.ActiveExecutionsQuery,
    ok: ok(flat({ success: z.literal(true), executions: z.array(R.Execution), total: z.number().int(), totalIsExact: z.boolean() })),
  },
  'GET /api/executions/:executionId': {
    operationId: 'getExecution',
    tag: 'Executions',
    summary: 'One execution with its log entries',
    auth: 'tenant',
    scopes: ['sessions:read'],
    params: P.ExecutionParams,
    ok: ok(flat({ success: z.literal(true), execution: R.ExecutionWithResult })),
  },
  'POST /api/executions/:executionId/cancel': {
    operationId: 'cancelExecution',
    tag: 'Executions',
    summary: 'Cancel a queued or running execution (extension)',
    description:
      'A queued job never runs; a running one stops at its next step and its provider call is aborted. It ends cancelled and nothing ' +
      "of it is billed. 409 'Execution already <status>' once it has ended.",
    auth: 'tenant',
    scopes: ['images:generate'],
    params: P.ExecutionParams,
    ok: ok(flat({ success: z.literal(true), execution: R.Execution }), 'The execution, cancelled or being cancelled'),
    errors: [409],
  },
  'GET /api/executions/:executionId/stream': {
    operationId: 'streamExecution',
    tag: 'Executions',
    summary: 'Server-sent events for one execution; the stream ends after complete or error',
    description: 'Events: log, status, complete, error, heartbeat.',
    auth: 'tenant',
    scopes: ['sessions:read'],
    params: P.ExecutionParams,
    query: P.StreamQuery,
    ok: { status: 200, description: 'SSE: log, status, complete, error and heartbeat events', media: 'text/event-stream' },
  },

  // ---- usage and profile (SPEC 4.7) ----
  'GET /api/usage': {
    operationId: 'getUsage',
    tag: 'Usage',
    summary: 'Monthly usage (newest first), the rolling 30 days and the quota',
    description:
      'Months are UTC calendar months with any activity; total_bytes counts original images stored that month ' +
      '(deletes do not reduce it). recent covers the last 30 days. An invalid limit answers 400 Invalid limit.',
    auth: 'tenant',
    scopes: ['analytics:read'],
    query: B.UsageQuery,
    ok: ok(data(R.Usage)),
  },
  'GET /api/profile': {
    operationId: 'getProfile',
    tag: 'Usage',
    summary: 'The tenant and its quota object',
    description:
      'Response: {tenant:{tenantId, tenantName, quotas:{monthlyQuotaMb, monthlyUsedMb, monthlyRemainingMb, rateLimitPerMinute}, ' +
      'allowedModels, modelId}} (integers; used MB of the current UTC month, rounded). Extension: allowedModels (the ' +
      "models the tenant may generate with) and modelId (its default model); an administrator's change to them shows " +
      'here within 5 seconds.',
    auth: 'tenant',
    scopes: ['analytics:read'],
    ok: ok(R.Profile),
  },

  // ---- webhooks (SPEC 4.11) ----
  'GET /api/webhooks': {
    operationId: 'listWebhooks',
    tag: 'Webhooks',
    summary: 'List webhook endpoints',
    auth: 'tenant',
    scopes: ['analytics:read'],
    ok: ok(data(z.array(R.Webhook))),
  },
  'POST /api/webhooks': {
    operationId: 'createWebhook',
    tag: 'Webhooks',
    summary: 'Create a webhook endpoint (the signing secret is returned once, here)',
    description:
      `url must be HTTPS and resolve to public IP addresses. events: the types it receives, of ${WEBHOOK_EVENT_TYPES.join(', ')} ` +
      '(absent or empty: all; an unknown type is refused with 400; every payload is in the `webhooks` section). ' +
      `At most ${WEBHOOKS_PER_TENANT_MAX} endpoints per tenant.`,
    auth: 'tenant',
    scopes: ['analytics:read'],
    idempotent: true,
    body: B.WebhookBody,
    ok: ok(data(R.WebhookCreated), 'Created; the signing secret is shown once', 201),
    errors: [409],
  },
  'DELETE /api/webhooks': {
    operationId: 'deleteWebhooksByIdOrUrl',
    tag: 'Webhooks',
    summary: 'Delete a webhook endpoint by id or by URL (query or body)',
    description: 'Same as DELETE /api/webhooks/:id when `id` is given; with `url`, deletes every endpoint with that URL.',
    auth: 'tenant',
    scopes: ['analytics:read'],
    query: P.WebhookDeleteQuery,
    ok: ok(
      data(
        z.union([
          z.object({ deleted: z.literal(true), id: z.number().int() }).describe('deleted by id'),
          z.object({ deleted: z.literal(true), ids: z.array(z.number().int()) }).describe('deleted by url: every webhook with it'),
        ]),
      ),
    ),
    errors: [404],
  },
  'GET /api/webhooks/:id': {
    operationId: 'getWebhook',
    tag: 'Webhooks',
    summary: 'Get a webhook endpoint',
    auth: 'tenant',
    scopes: ['analytics:read'],
    params: P.IdParams,
    ok: ok(data(R.Webhook)),
  },
  'PATCH /api/webhooks/:id': {
    operationId: 'updateWebhook',
    tag: 'Webhooks',
    summary: 'Enable/disable a webhook endpoint, change its description or the event types it receives',
    description:
      'enabled:true re-enables an endpoint disabled after 5 consecutive failures (the failure count resets and pending ' +
      'deliveries are sent at once); enabled:false pauses delivery. events: the event types it receives from now on ' +
      '(empty: all of them); deliveries already queued are sent as they are.',
    auth: 'tenant',
    scopes: ['analytics:read'],
    params: P.IdParams,
    body: B.WebhookUpdateBody,
    // An empty body is refused by the schema (zod has no minProperties), one with neither field by the route.
    bodyRules: { minProperties: 1 },
    ok: ok(data(R.Webhook)),
  },
  'DELETE /api/webhooks/:id': {
    operationId: 'deleteWebhook',
    tag: 'Webhooks',
    summary: 'Delete a webhook endpoint and its delivery log',
    auth: 'tenant',
    scopes: ['analytics:read'],
    params: P.IdParams,
    ok: ok(data(z.object({ deleted: z.literal(true), id: z.number().int() }))),
  },
  'GET /api/webhooks/:id/deliveries': {
    operationId: 'listWebhookDeliveries',
    tag: 'Webhooks',
    summary: 'Delivery log of a webhook endpoint (newest first, with every attempt)',
    auth: 'tenant',
    scopes: ['analytics:read'],
    params: P.IdParams,
    query: P.WebhookDeliveriesQuery,
    ok: ok(data(z.array(R.Delivery))),
  },
  'POST /api/webhooks/:id/test': {
    operationId: 'testWebhook',
    tag: 'Webhooks',
    summary: 'Queue a signed webhook.test delivery to the endpoint',
    auth: 'tenant',
    scopes: ['analytics:read'],
    params: P.IdParams,
    ok: ok(data(R.Delivery), 'A test delivery was queued', 202),
  },
  'POST /api/webhooks/:id/deliveries/:deliveryId/replay': {
    operationId: 'replayWebhookDelivery',
    tag: 'Webhooks',
    summary: 'Extension (issue 37): send a delivery again, as a new delivery of the same event',
    description:
      'Queues a new delivery of the same event to the same endpoint: the same webhook-id (the event id) and the same body, ' +
      'byte for byte, with fresh signatures, timestamps and attempts (retries and auto-disable as any delivery; held while ' +
      "the endpoint is disabled). Its replayOf names the original. 409 'Delivery is still pending' while the original " +
      "is being retried; 404 'Delivery not found' for another endpoint's delivery.",
    auth: 'tenant',
    scopes: ['analytics:read'],
    idempotent: true,
    params: P.WebhookDeliveryParams,
    ok: ok(data(R.Delivery), 'The replay was queued', 202),
  },

  // ---- a tenant's data: export and purge (extension, issue 40, item 4) ----
  'POST /api/exports': {
    operationId: 'createExport',
    tag: 'Exports',
    summary: "Export all of the tenant's data as a ZIP: starts a job (extension)",
    description:
      'Answers 202 with the export at once; GET /api/exports/:exportId reads its progress, and once completed ' +
      '/download streams the ZIP: tenant.json (every resource, no secret) and objects/ (every image, thumbnail and ' +
      'product file, byte for byte). The ZIP is kept EXPORT_RETENTION_DAYS (default 7).',
    auth: 'tenant',
    scopes: ['images:read'],
    ok: ok(data(R.TenantExport), 'The export job was started', 202),
  },
  'GET /api/exports/:exportId': {
    operationId: 'getExport',
    tag: 'Exports',
    summary: "An export's status and progress (extension)",
    auth: 'tenant',
    scopes: ['images:read'],
    params: P.ExportParams,
    ok: ok(data(R.TenantExport)),
    errors: [404],
  },
  'GET /api/exports/:exportId/download': {
    operationId: 'downloadExport',
    tag: 'Exports',
    summary: "A completed export's ZIP (extension)",
    description: "409 'Export is not completed' before it is; 410 'Export has expired' after its keeping time.",
    auth: 'tenant',
    scopes: ['images:read'],
    params: P.ExportParams,
    ok: { status: 200, description: 'The ZIP', media: 'application/zip' },
    errors: [404, 409, 410],
  },
  'POST /admin/tenants/:tenantId/exports': {
    operationId: 'createTenantExport',
    tag: 'Admin',
    summary: "Export all of a tenant's data as a ZIP: starts a job (extension)",
    auth: 'super_admin',
    params: P.TenantParams,
    ok: ok(data(R.TenantExport), 'The export job was started', 202),
    errors: [404],
  },
  'GET /admin/tenants/:tenantId/exports/:exportId': {
    operationId: 'getTenantExport',
    tag: 'Admin',
    summary: "A tenant export's status and progress (extension)",
    auth: 'super_admin',
    params: P.TenantExportParams,
    ok: ok(data(R.TenantExport)),
    errors: [404],
  },
  'GET /admin/tenants/:tenantId/exports/:exportId/download': {
    operationId: 'downloadTenantExport',
    tag: 'Admin',
    summary: "A completed tenant export's ZIP (extension)",
    auth: 'super_admin',
    params: P.TenantExportParams,
    ok: { status: 200, description: 'The ZIP', media: 'application/zip' },
    errors: [404, 409, 410],
  },
  'POST /admin/tenants/:tenantId/purge': {
    operationId: 'purgeTenant',
    tag: 'Admin',
    summary: 'Remove everything of a deactivated tenant; only its audit records are left (extension)',
    description:
      "The body repeats the tenant's id ({confirm}). 409 'Tenant must be deactivated before it is purged' while it is " +
      'active. Rows in every schema, objects (images, thumbnails, products, export ZIPs), Redis keys and every ' +
      "replica's cached credentials go. Idempotent and resumable: a purge cut short is finished by sending it again.",
    auth: 'super_admin',
    params: P.TenantParams,
    body: B.TenantPurgeBody,
    ok: ok(data(R.TenantPurgeResult)),
    // 503/504: a step could not finish (a service or store unreachable or too slow); send the purge again.
    errors: [404, 409, 503, 504],
  },
} satisfies Record<string, OperationSpec>;

export const OPERATIONS: Record<string, OperationSpec> = CATALOGUE;

/** The key of a catalogued operation: 'METHOD /path/:param'. */
export type OperationKey = keyof typeof CATALOGUE;
