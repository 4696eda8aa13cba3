import { z } from 'zod';
import { AssetPagination, Deleted, data, PagePagination, StylePresetPagination, Success } from './common.js';
import * as B from './requests.js';
import * as R from './resources.js';
import type { Scope } from './vocab.js';

/**
 * Every REST and admin operation of the gateway: its operationId, tag, credential and answers. The route
 * modules validate the request bodies of requests.ts (what fastify checks, shown by the document unless `body`
 * below shows the full schema); this catalogue owns what each operation answers, from the resource shapes of
 * resources.ts. The gateway's OpenAPI document is built from both
 * (services/gateway/src/openapi.ts), and the end-to-end suite checks every answer against that document.
 */

export type OperationAuth = 'none' | 'tenant' | 'admin' | 'super_admin';

export interface OperationSpec {
  operationId: string;
  tag: string;
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
  /** The success answer: its status, its JSON body (or another media type). */
  ok: { status: number; description: string; schema?: z.ZodTypeAny; media?: 'application/zip' | 'text/event-stream' };
  /** Error statuses this operation answers besides the ones every operation of its kind does (see openapi.ts). */
  errors?: number[];
  /** Answers an ETag and, to a request whose If-None-Match holds it, 304 Not Modified without a body. */
  conditional?: boolean;
  /** Stores images, so the storage quota applies (402 QUOTA_EXCEEDED). */
  bills?: boolean;
  /** Calls an image provider or fetches a URL (502, 504). */
  upstream?: boolean;
  /**
   * The request body with every rule, when the route's validator checks only the JSON types (its service then
   * reports every problem at once with the SPEC's texts); the document shows this one.
   */
  body?: z.ZodTypeAny;
}

const list = <T extends z.ZodTypeAny>(item: T, pagination: z.ZodTypeAny) => z.object({ data: z.array(item), pagination });
const flat = <T extends z.ZodRawShape>(shape: T) => z.object(shape);

const ok = (schema: z.ZodTypeAny, description = 'OK', status = 200) => ({ status, description, schema });

const CATALOGUE = {
  // ---- images (SPEC 4.1) ----
  'GET /api/images': {
    operationId: 'listImages',
    tag: 'Images',
    auth: 'tenant',
    scopes: ['images:read'],
    ok: ok(list(R.Image, R.ImagePagination), 'A page of images, newest first'),
  },
  'POST /api/images': {
    operationId: 'generateImages',
    tag: 'Images',
    auth: 'tenant',
    scopes: ['images:generate'],
    idempotent: true,
    rate: 'generation',
    ok: ok(data(R.GenerateResult), 'The generated images'),
    body: B.GenerateImagesBody,
    bills: true,
    upstream: true,
    errors: [404],
  },
  'GET /api/images/:id': {
    operationId: 'getImage',
    tag: 'Images',
    auth: 'tenant',
    scopes: ['images:read'],
    ok: ok(data(R.ImageDetail), 'The image with its edit history'),
  },
  'DELETE /api/images/:id': {
    operationId: 'deleteImage',
    tag: 'Images',
    auth: 'tenant',
    scopes: ['images:delete'],
    ok: { status: 204, description: 'Deleted (no body)' },
  },
  'POST /api/images/delete-bulk': {
    operationId: 'deleteImages',
    tag: 'Images',
    auth: 'tenant',
    scopes: ['images:delete'],
    ok: ok(data(R.BulkDeleteResult), 'Per-id results'),
  },
  'POST /api/images/download': {
    operationId: 'downloadImages',
    tag: 'Images',
    auth: 'tenant',
    scopes: ['images:read'],
    ok: { status: 200, description: 'ZIP of the originals (image-<id>.<ext>)', media: 'application/zip' },
    errors: [404],
  },
  'POST /api/edit-image': {
    operationId: 'editImage',
    tag: 'Images',
    auth: 'tenant',
    scopes: ['images:edit'],
    idempotent: true,
    rate: 'generation',
    ok: ok(R.EditResult, 'The edited image (flat object)'),
    body: B.EditImageBody,
    bills: true,
    upstream: true,
    errors: [404],
  },
  'POST /api/upload-for-editing': {
    operationId: 'uploadForEditing',
    tag: 'Images',
    auth: 'tenant',
    scopes: ['images:edit'],
    idempotent: true,
    rate: 'upload',
    ok: ok(R.UploadResult, 'The stored upload (flat object)'),
    body: B.UploadForEditingBody,
    bills: true,
    upstream: true,
  },

  // ---- characters (SPEC 4.2) ----
  'GET /api/characters': {
    operationId: 'listCharacters',
    tag: 'Characters',
    auth: 'tenant',
    scopes: ['characters:read'],
    ok: ok(list(R.CharacterListItem, AssetPagination)),
  },
  'GET /api/characters/:identifier': {
    operationId: 'getCharacter',
    tag: 'Characters',
    auth: 'tenant',
    scopes: ['characters:read'],
    ok: ok(data(R.Character)),
  },
  'POST /api/characters': {
    operationId: 'createCharacter',
    tag: 'Characters',
    auth: 'tenant',
    scopes: ['characters:manage'],
    idempotent: true,
    ok: ok(data(R.Character)),
    body: B.CharacterBody,
    errors: [409],
  },
  'PATCH /api/characters/:identifier': {
    operationId: 'updateCharacter',
    tag: 'Characters',
    auth: 'tenant',
    scopes: ['characters:manage'],
    ok: ok(data(R.Character)),
    body: B.CharacterUpdateBody,
    errors: [409],
  },
  'DELETE /api/characters/:identifier': {
    operationId: 'deleteCharacter',
    tag: 'Characters',
    auth: 'tenant',
    scopes: ['characters:manage'],
    ok: ok(data(Deleted)),
  },
  'POST /api/characters/:identifier/generate': {
    operationId: 'generateCharacterImage',
    tag: 'Characters',
    auth: 'tenant',
    scopes: ['images:generate', 'characters:read'],
    idempotent: true,
    rate: 'generation',
    ok: ok(data(R.CharacterGenerateResult)),
    bills: true,
    upstream: true,
  },
  'POST /api/characters/generate-multi': {
    operationId: 'generateMultiCharacterImage',
    tag: 'Characters',
    auth: 'tenant',
    scopes: ['images:generate', 'characters:read'],
    idempotent: true,
    rate: 'generation',
    ok: ok(data(R.MultiCharacterResult)),
    bills: true,
    upstream: true,
    errors: [404],
  },

  // ---- style presets (SPEC 4.3) ----
  'GET /api/style-presets': {
    operationId: 'listStylePresets',
    tag: 'Style presets',
    auth: 'tenant',
    scopes: ['styles:read'],
    ok: ok(list(R.StylePreset, StylePresetPagination)),
  },
  'GET /api/style-presets/:id': {
    operationId: 'getStylePreset',
    tag: 'Style presets',
    auth: 'tenant',
    scopes: ['styles:read'],
    ok: ok(data(R.StylePreset)),
  },
  'POST /api/style-presets': {
    operationId: 'createStylePreset',
    tag: 'Style presets',
    auth: 'tenant',
    scopes: ['styles:manage'],
    idempotent: true,
    ok: ok(data(R.StylePreset)),
    body: B.StylePresetBody,
    errors: [409],
  },
  'PATCH /api/style-presets/:id': {
    operationId: 'updateStylePreset',
    tag: 'Style presets',
    auth: 'tenant',
    scopes: ['styles:manage'],
    ok: ok(data(R.StylePreset)),
    body: B.StylePresetUpdateBody,
    errors: [409],
  },
  'DELETE /api/style-presets/:id': {
    operationId: 'deleteStylePreset',
    tag: 'Style presets',
    auth: 'tenant',
    scopes: ['styles:manage'],
    ok: ok(data(Deleted)),
  },

  // ---- products (SPEC 4.4) ----
  'GET /api/products': {
    operationId: 'listProducts',
    tag: 'Products',
    auth: 'tenant',
    scopes: ['products:read'],
    ok: ok(list(R.Product, PagePagination)),
  },
  'GET /api/products/:identifier': {
    operationId: 'getProduct',
    tag: 'Products',
    auth: 'tenant',
    scopes: ['products:read'],
    ok: ok(data(R.ProductDetail)),
  },
  'POST /api/products': {
    operationId: 'createProduct',
    tag: 'Products',
    auth: 'tenant',
    scopes: ['products:manage'],
    idempotent: true,
    ok: ok(data(R.ProductCreated)),
    bills: true,
    upstream: true,
    errors: [409],
  },
  'PATCH /api/products/:identifier': {
    operationId: 'updateProduct',
    tag: 'Products',
    auth: 'tenant',
    scopes: ['products:manage'],
    ok: ok(data(R.ProductUpdated)),
    errors: [409],
  },
  'DELETE /api/products/:identifier': {
    operationId: 'deleteProduct',
    tag: 'Products',
    auth: 'tenant',
    scopes: ['products:manage'],
    ok: ok(data(Deleted)),
  },
  'POST /api/products/:identifier/generate': {
    operationId: 'generateProductImage',
    tag: 'Products',
    auth: 'tenant',
    scopes: ['images:generate', 'products:read'],
    idempotent: true,
    rate: 'generation',
    ok: ok(data(R.ProductGenerateResult)),
    bills: true,
    upstream: true,
  },

  // ---- scenes (SPEC 4.5) ----
  'GET /api/scenes': {
    operationId: 'listScenes',
    tag: 'Scenes',
    auth: 'tenant',
    scopes: ['styles:read'],
    ok: ok(list(R.SceneListItem, AssetPagination)),
  },
  'GET /api/scenes/:identifier': { operationId: 'getScene', tag: 'Scenes', auth: 'tenant', scopes: ['styles:read'], ok: ok(data(R.Scene)) },
  'POST /api/scenes': {
    operationId: 'createScene',
    tag: 'Scenes',
    auth: 'tenant',
    scopes: ['styles:manage'],
    idempotent: true,
    ok: ok(data(R.Scene)),
    body: B.SceneBody,
    bills: true,
    upstream: true,
    errors: [409],
  },
  'PATCH /api/scenes/:identifier': {
    operationId: 'updateScene',
    tag: 'Scenes',
    auth: 'tenant',
    scopes: ['styles:manage'],
    ok: ok(data(R.Scene)),
    body: B.SceneUpdateBody,
    bills: true,
    upstream: true,
    errors: [409],
  },
  'DELETE /api/scenes/:identifier': {
    operationId: 'deleteScene',
    tag: 'Scenes',
    auth: 'tenant',
    scopes: ['styles:manage'],
    ok: ok(data(R.SceneDeleted)),
  },

  // ---- search presets (SPEC 4.6) ----
  'GET /api/search-presets': {
    operationId: 'listSearchPresets',
    tag: 'Search presets',
    auth: 'tenant',
    scopes: ['images:read'],
    ok: ok(data(z.array(R.SearchPreset))),
  },
  'POST /api/search-presets': {
    operationId: 'createSearchPreset',
    tag: 'Search presets',
    auth: 'tenant',
    scopes: ['images:read'],
    idempotent: true,
    ok: ok(data(R.SearchPreset)),
    body: B.SearchPresetBody,
    errors: [409],
  },
  'DELETE /api/search-presets/:id': {
    operationId: 'deleteSearchPreset',
    tag: 'Search presets',
    auth: 'tenant',
    scopes: ['images:read'],
    ok: ok(data(Deleted)),
  },
  'GET /api/search-presets/:id/images': {
    operationId: 'listSearchPresetImages',
    tag: 'Search presets',
    auth: 'tenant',
    scopes: ['images:read'],
    ok: ok(z.object({ data: z.array(R.Image), pagination: R.ImagePagination, preset: R.SearchPreset }), 'The images the preset finds'),
  },

  // ---- usage and profile (SPEC 4.7) ----
  'GET /api/profile': { operationId: 'getProfile', tag: 'Usage', auth: 'tenant', scopes: ['analytics:read'], ok: ok(R.Profile) },
  'GET /api/usage': { operationId: 'getUsage', tag: 'Usage', auth: 'tenant', scopes: ['analytics:read'], ok: ok(data(R.Usage)) },

  // ---- sessions and executions (SPEC 4.8) ----
  'GET /api/sessions': {
    operationId: 'listSessions',
    tag: 'Sessions',
    auth: 'tenant',
    scopes: ['sessions:read'],
    ok: ok(list(R.SessionSummary, R.ImagePagination)),
  },
  'GET /api/sessions/:sessionId': {
    operationId: 'getSession',
    tag: 'Sessions',
    auth: 'tenant',
    scopes: ['sessions:read'],
    ok: ok(data(z.object({ session: R.SessionRecord, images: z.array(R.SessionImage) }))),
    conditional: true,
  },
  'GET /api/sessions/:sessionId/logs': {
    operationId: 'listSessionLogs',
    tag: 'Sessions',
    auth: 'tenant',
    scopes: ['sessions:read'],
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
    auth: 'tenant',
    scopes: ['sessions:read'],
    ok: { status: 200, description: 'SSE: log, status, complete, error and heartbeat events', media: 'text/event-stream' },
  },
  'GET /api/executions/active': {
    operationId: 'listActiveExecutions',
    tag: 'Executions',
    auth: 'tenant',
    scopes: ['sessions:read'],
    ok: ok(flat({ success: z.literal(true), executions: z.array(R.Execution), total: z.number().int(), totalIsExact: z.boolean() })),
  },
  'GET /api/executions/:executionId': {
    operationId: 'getExecution',
    tag: 'Executions',
    auth: 'tenant',
    scopes: ['sessions:read'],
    ok: ok(flat({ success: z.literal(true), execution: R.ExecutionDetail })),
  },
  'GET /api/executions/:executionId/stream': {
    operationId: 'streamExecution',
    tag: 'Executions',
    auth: 'tenant',
    scopes: ['sessions:read'],
    ok: { status: 200, description: 'SSE: log, status, complete, error and heartbeat events', media: 'text/event-stream' },
  },

  // ---- webhooks (SPEC 4.11) ----
  'GET /api/webhooks': {
    operationId: 'listWebhooks',
    tag: 'Webhooks',
    auth: 'tenant',
    scopes: ['analytics:read'],
    ok: ok(data(z.array(R.Webhook))),
  },
  'POST /api/webhooks': {
    operationId: 'createWebhook',
    tag: 'Webhooks',
    auth: 'tenant',
    scopes: ['analytics:read'],
    idempotent: true,
    ok: ok(data(R.WebhookCreated), 'Created; the signing secret is shown once', 201),
    errors: [409],
  },
  'GET /api/webhooks/:id': {
    operationId: 'getWebhook',
    tag: 'Webhooks',
    auth: 'tenant',
    scopes: ['analytics:read'],
    ok: ok(data(R.Webhook)),
  },
  'PATCH /api/webhooks/:id': {
    operationId: 'updateWebhook',
    tag: 'Webhooks',
    auth: 'tenant',
    scopes: ['analytics:read'],
    ok: ok(data(R.Webhook)),
  },
  'DELETE /api/webhooks/:id': {
    operationId: 'deleteWebhook',
    tag: 'Webhooks',
    auth: 'tenant',
    scopes: ['analytics:read'],
    ok: ok(data(z.object({ deleted: z.literal(true), id: z.number().int() }))),
  },
  'DELETE /api/webhooks': {
    operationId: 'deleteWebhooksByIdOrUrl',
    tag: 'Webhooks',
    auth: 'tenant',
    scopes: ['analytics:read'],
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
  'GET /api/webhooks/:id/deliveries': {
    operationId: 'listWebhookDeliveries',
    tag: 'Webhooks',
    auth: 'tenant',
    scopes: ['analytics:read'],
    ok: ok(data(z.array(R.Delivery))),
  },
  'POST /api/webhooks/:id/test': {
    operationId: 'testWebhook',
    tag: 'Webhooks',
    auth: 'tenant',
    scopes: ['analytics:read'],
    ok: ok(data(R.Delivery), 'A test delivery was queued', 202),
  },

  // ---- administration (SPEC 4.9) ----
  'POST /admin/auth/login': {
    operationId: 'adminLogin',
    tag: 'Admin',
    auth: 'none',
    ok: ok(data(R.AdminSession), 'A session token (use as Authorization: Bearer)'),
    errors: [401, 423],
  },
  'POST /admin/auth/logout': { operationId: 'adminLogout', tag: 'Admin', auth: 'admin', ok: ok(data(Success)) },
  'GET /admin/me': { operationId: 'getAdminMe', tag: 'Admin', auth: 'admin', ok: ok(data(R.AdminMe)) },
  'GET /admin/stats': { operationId: 'getAdminStats', tag: 'Admin', auth: 'admin', ok: ok(data(R.AdminStats)) },
  'GET /admin/tenants': { operationId: 'listTenants', tag: 'Admin', auth: 'admin', ok: ok(data(z.array(R.Tenant))) },
  'GET /admin/tenants/:tenantId': { operationId: 'getTenant', tag: 'Admin', auth: 'admin', ok: ok(data(R.TenantDetail)) },
  'POST /admin/tenants': { operationId: 'createTenant', tag: 'Admin', auth: 'super_admin', ok: ok(data(R.TenantCreated)), errors: [409] },
  'PATCH /admin/tenants/:tenantId': { operationId: 'updateTenant', tag: 'Admin', auth: 'super_admin', ok: ok(data(R.TenantDetail)) },
  'POST /admin/tenants/:tenantId/api-keys': {
    operationId: 'createApiKey',
    tag: 'Admin',
    auth: 'super_admin',
    ok: ok(data(R.CreatedApiKey), 'The new key (its full value is shown once)'),
    errors: [409],
  },
  'DELETE /admin/tenants/:tenantId/api-keys/:keyRef': {
    operationId: 'revokeApiKey',
    tag: 'Admin',
    auth: 'super_admin',
    ok: ok(data(z.object({ success: z.literal(true), key: R.ApiKeyRecord }))),
  },
  'GET /admin/users': { operationId: 'listAdminUsers', tag: 'Admin', auth: 'admin', ok: ok(data(z.array(R.AdminUser))) },
  'GET /admin/users/:userId': { operationId: 'getAdminUser', tag: 'Admin', auth: 'admin', ok: ok(data(R.AdminUser)) },
  'PATCH /admin/users/:userId': {
    operationId: 'updateAdminUser',
    tag: 'Admin',
    auth: 'super_admin',
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
    auth: 'super_admin',
    ok: ok(data(z.object({ success: z.literal(true), userId: z.string(), message: z.string() }))),
  },
  'GET /admin/invitations': { operationId: 'listInvitations', tag: 'Admin', auth: 'admin', ok: ok(data(z.array(R.Invitation))) },
  'POST /admin/invitations': {
    operationId: 'createInvitation',
    tag: 'Admin',
    auth: 'super_admin',
    ok: ok(data(R.InvitationCreated)),
    errors: [404, 409],
  },
  'DELETE /admin/invitations/:token': {
    operationId: 'revokeInvitation',
    tag: 'Admin',
    auth: 'super_admin',
    ok: ok(data(Success)),
    errors: [409],
  },
  'GET /admin/invitations/:token': {
    operationId: 'getInvitation',
    tag: 'Admin',
    auth: 'none',
    ok: ok(data(R.InvitationPublic), 'What an invitation offers (no credential: the token is the secret)'),
    errors: [410],
  },
  'POST /admin/invitations/:token/accept': {
    operationId: 'acceptInvitation',
    tag: 'Admin',
    auth: 'none',
    ok: ok(data(R.AdminSession), 'The new admin user, signed in'),
    errors: [409, 410],
  },

  // ---- health ----
  'GET /health': { operationId: 'getHealth', tag: 'Health', auth: 'none', ok: ok(R.Health, 'The gateway is up') },
} satisfies Record<string, OperationSpec>;

export const OPERATIONS: Record<string, OperationSpec> = CATALOGUE;

/** The key of a catalogued operation: 'METHOD /path/:param'. */
export type OperationKey = keyof typeof CATALOGUE;
