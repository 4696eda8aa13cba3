import { z } from 'zod';
import { SearchFilters } from './requests.js';
import { ADMIN_ROLES, GENERATION_EVENTS, MODEL_IDS, PROVIDERS, QUOTA_EVENTS, REFERENCE_MODES } from './vocab.js';

/**
 * The JSON form of every resource the REST API and the MCP tools answer with (SPEC 2), defined once. The
 * gateway's OpenAPI document, the contract check of the end-to-end suite, the MCP tools' outputSchema and the
 * presenters' return types (libs/operations/src/present.ts) all derive from these.
 */

const int = () => z.number().int();
const id = () => z.number().int().min(1);
const ts = () => z.string().datetime({ offset: true });
const nstr = () => z.string().nullable();

// ---- images ----

export const Image = z.object({
  id: id(),
  sessionId: z.string(),
  fullUrl: z.string(),
  thumbnailUrl: z.string(),
  width: int(),
  height: int(),
  sizeBytes: int(),
  prompt: z.string(),
  negativePrompt: nstr(),
  operation: z.string().describe('generate, edit, upload, ...'),
  aspectRatio: z.string(),
  createdAt: ts(),
});

export const ImageDetailFields = z.object({
  modelId: z.string(),
  stylePresetId: id().nullable(),
  productReferenceId: id().nullable(),
  referenceGroupIds: z.array(int()).nullable(),
  parent_image_id: id().nullable().describe("an edit's parent image"),
  resolutionTier: nstr(),
  format: z.string(),
  mimeType: z.string(),
  isReference: z.boolean(),
});

export const EditHistoryEntry = z.object({
  id: id(),
  operation: z.string(),
  prompt: z.string(),
  parent_image_id: id().nullable(),
  createdAt: ts(),
  fullUrl: z.string(),
  thumbnailUrl: z.string(),
});

/** (extension, issue 39) What the stored file's C2PA Content Credentials said when it was stored. */
export const ContentCredentialsSummary = z
  .object({
    present: z.boolean().describe('whether the stored file carries a C2PA manifest'),
    validationState: nstr().describe('Trusted, Valid or Invalid (c2pa validation state); null when none'),
    issuer: nstr().describe("the signer's organization; null when none"),
  })
  .describe('(extension) Content Credentials (C2PA) of the stored file, recorded when it was stored');

export const ImageDetail = Image.merge(ImageDetailFields).extend({
  editHistory: z.object({ ancestors: z.array(EditHistoryEntry), edits: z.array(EditHistoryEntry) }),
  contentCredentials: ContentCredentialsSummary,
});

/** (extension, issue 39) GET /api/images/:id/credentials: the whole manifest store, validated now. */
export const ImageCredentials = ContentCredentialsSummary.extend({
  imageId: id(),
  manifestStore: z
    .record(z.string(), z.unknown())
    .nullable()
    .describe('the C2PA manifest store as c2pa-rs reads it (manifests, active_manifest, validation_results); null when none'),
}).describe('(extension) The Content Credentials of a stored image, validated against the configured trust anchors');

export const SessionImage = Image.merge(ImageDetailFields).extend({
  thumbnailSizeBytes: int(),
  objectKey: z.string(),
  objectThumbnailKey: z.string(),
});

export const ImagePagination = z.object({
  total: int(),
  limit: int(),
  offset: int(),
  totalIsExact: z.boolean().describe('false when total is a capped estimate'),
  nextCursor: nstr().describe('pass as cursor to continue after this page; null on the last page'),
});

export const GeneratedImage = z.object({
  record_id: id(),
  full_url: z.string(),
  thumbnail_url: z.string(),
  width: int(),
  height: int(),
  size_bytes: int(),
  format: z.string(),
  mime_type: z.string(),
  prompt: z.string(),
  negative_prompt: nstr(),
  has_synthid: z.boolean(),
  created_at: ts(),
  aspect_ratio: z.string(),
  model_id: z.string(),
  resolution_tier: z.string(),
  parent_image_id: id().nullable(),
});

export const GenerateResult = z.object({
  images: z.array(GeneratedImage),
  metadata: z.object({ requested: int(), generated: int(), session_id: z.string() }),
  executionId: z.string(),
});

export const EditResult = z.object({
  thumbnailUrl: z.string(),
  fullUrl: z.string(),
  width: int(),
  height: int(),
  sizeBytes: int(),
  format: z.string(),
  prompt: z.string(),
  parentImageId: id(),
  recordId: id(),
  createdAt: ts(),
  aspectRatio: z.string(),
  sessionId: z.string(),
  executionId: z.string(),
});

export const UploadResult = z.object({
  image_id: id(),
  object_key: z.string(),
  public_url: z.string(),
  thumbnail_url: z.string(),
  size_bytes: int(),
  mime_type: z.string(),
  width: int(),
  height: int(),
  session_id: z.string(),
  execution_id: z.string(),
  message: z.string(),
});

export const BulkDeleteResult = z.object({
  deleted: z.array(id()),
  failed: z.array(z.object({ id: int(), error: z.string() })),
  summary: z.object({ total: int(), succeeded: int(), failed: int() }),
});

// ---- saved assets ----

export const RefImage = z.object({ id: id(), url: z.string(), thumbnail_url: z.string() });

const characterCommon = {
  id: id(),
  character_name: z.string(),
  description: nstr(),
  base_prompt: z.string(),
  negative_prompt: nstr(),
  system_instruction: nstr(),
  preferred_aspect_ratio: nstr(),
  tags: z.array(z.string()),
  times_used: int(),
  created_at: ts(),
  updated_at: ts(),
  last_used_at: ts().nullable(),
};
export const Character = z.object({ ...characterCommon, reference_images: z.array(RefImage) });
export const CharacterListItem = z.object({ ...characterCommon, reference_image_count: int(), thumbnail_url: nstr() });

export const CharacterGenerateResult = z.object({
  imageId: id(),
  sessionId: z.string(),
  fullUrl: z.string(),
  thumbnailUrl: z.string(),
  objectKey: z.string(),
  width: int(),
  height: int(),
  format: z.string(),
  sizeBytes: int(),
  thumbnailSizeBytes: int(),
  prompt: z.string(),
  message: z.string(),
});

export const MultiCharacterResult = z.object({
  imageId: id(),
  sessionId: z.string(),
  fullUrl: z.string(),
  thumbnailUrl: z.string(),
  width: int(),
  height: int(),
  prompt: z.string(),
  characterCount: int(),
  message: z.string(),
});

const productCommon = {
  id: id(),
  productName: z.string(),
  productDescription: nstr(),
  productUrl: z.string(),
  tags: z.string().describe('comma-separated'),
  timesUsed: int(),
  lastUsedAt: ts().nullable(),
  createdAt: ts(),
  updatedAt: ts(),
  fullUrl: z.string(),
  thumbnailUrl: z.string(),
};
export const Product = z.object(productCommon);
export const ProductDetail = z.object({
  ...productCommon,
  width: int(),
  height: int(),
  sizeBytes: int(),
  format: z.string(),
  mimeType: z.string(),
  objectKey: z.string(),
  objectThumbnailKey: z.string(),
});
export const ProductCreated = z.object({
  id: id(),
  productName: z.string(),
  productUrl: z.string(),
  objectKey: z.string(),
  objectThumbnailKey: z.string(),
  width: int(),
  height: int(),
  sizeBytes: int(),
  thumbnailSizeBytes: int(),
  format: z.string(),
  message: z.string(),
});
export const ProductUpdated = z.object({
  id: id(),
  productName: z.string(),
  productDescription: nstr(),
  tags: z.string(),
  updatedAt: ts(),
});
export const ProductGenerateResult = z.object({
  imageId: id(),
  sessionId: z.string(),
  fullUrl: z.string(),
  thumbnailUrl: z.string(),
  width: int(),
  height: int(),
  format: z.string(),
  sizeBytes: int(),
  prompt: z.string(),
  productId: id(),
  productName: z.string(),
  scenePrompt: z.string().optional(),
  images: z.array(RefImage),
  message: z.string(),
});

const sceneCommon = {
  id: id(),
  sceneName: z.string(),
  description: nstr(),
  scenePrompt: nstr(),
  defaultReferenceMode: z.enum(REFERENCE_MODES).nullable(),
  preferredAspectRatio: nstr(),
  tags: z.array(z.string()),
  timesUsed: int(),
  createdAt: ts(),
  updatedAt: ts(),
  lastUsedAt: ts().nullable(),
};
export const Scene = z.object({
  ...sceneCommon,
  referenceImages: z.array(z.object({ id: id(), objectKey: z.string(), url: z.string(), thumbnailUrl: z.string() })),
});
export const SceneListItem = z.object({ ...sceneCommon, imageCount: int(), thumbnailUrl: nstr() });
export const SceneDeleted = z.object({ deleted: z.literal(true), sceneId: id(), sceneName: z.string(), imageCount: int() });

export const StylePreset = z.object({
  id: id(),
  name: z.string(),
  prompt: nstr(),
  negative_prompt: nstr(),
  system_instruction: nstr(),
  aspect_ratio: nstr(),
  created_at: ts(),
  updated_at: ts(),
});

export const SearchPreset = z.object({
  id: id(),
  tenantId: z.string(),
  presetName: z.string(),
  filters: SearchFilters,
  createdAt: ts(),
  updatedAt: ts(),
});

// ---- sessions and executions ----

export const SessionSummary = z.object({
  sessionId: z.string(),
  isActive: z.boolean(),
  createdAt: ts(),
  lastActivityAt: ts(),
  totalImages: int(),
  totalEdits: int(),
  totalBytes: int(),
  totalMegabytes: z.number(),
  totalTokens: int(),
});

export const SessionRecord = z.object({
  session_id: z.string(),
  tenant_id: z.string(),
  is_active: z.union([z.literal(0), z.literal(1)]),
  created_at: ts(),
  last_activity_at: ts(),
});

export const LogEntry = z.object({ timestamp: ts(), message: z.string(), level: z.enum(['info', 'warn', 'error']) });

export const Execution = z.object({
  executionId: z.string(),
  sessionId: z.string(),
  toolName: z.string(),
  toolSource: z.string(),
  status: z.enum(['queued', 'running', 'completed', 'failed', 'cancelled']),
  progressPercent: int().min(0).max(100),
  currentStep: nstr(),
  startedAt: ts(),
  completedAt: ts().nullable(),
  durationMs: int().nullable(),
  resultSummary: nstr(),
  error: nstr(),
  modelId: nstr(),
  /** Extension (async jobs): a queued job's place in its tenant's queue (1 = next), else null. */
  position: int().min(1).nullable(),
  /** Extension: a cancel was asked for (POST /api/executions/:executionId/cancel) and the execution has not ended yet. */
  cancelRequested: z.boolean(),
});
export const ExecutionDetail = Execution.extend({ logEntries: z.array(LogEntry) });

/**
 * Extension (async jobs, `Prefer: respond-async`): the answer of an async submit (202), and the result of a
 * completed job: what the operation that submitted it answers synchronously.
 */
export const JobAccepted = z.object({
  data: z.object({
    executionId: z.string(),
    status: z.literal('queued'),
    position: int().min(1),
    statusUrl: z.string().describe('GET: the execution, with its result once completed'),
    streamUrl: z.string().describe('GET: server-sent events until it ends'),
    cancelUrl: z.string().describe('POST: cancel it'),
  }),
});
export const JobResult = z.union([
  z.object({ data: GenerateResult }),
  EditResult,
  z.object({ data: CharacterGenerateResult }),
  z.object({ data: MultiCharacterResult }),
  z.object({ data: ProductGenerateResult }),
]);
export const ExecutionWithResult = ExecutionDetail.extend({
  result: JobResult.optional().describe(
    'Extension: a completed async job (or any completed generation) answers here what its operation answers synchronously',
  ),
});

// ---- usage and profile ----

export const Quota = z.object({
  monthlyQuotaMb: int(),
  monthlyUsedMb: int(),
  monthlyRemainingMb: int(),
  rateLimitPerMinute: int(),
});

export const UsageMonth = z.object({
  month: z.string().regex(/^\d{4}-\d{2}$/),
  total_operations: int(),
  total_images: int(),
  total_bytes: int(),
  total_mb: z.number(),
  avg_duration_ms: int(),
});

export const Usage = z.object({
  months: z.array(UsageMonth).describe('newest first'),
  recent: z.object({ bytes: int(), images: int() }).describe('rolling 30 days'),
  quota: Quota,
});

export const Profile = z.object({
  tenant: z.object({
    tenantId: z.string(),
    tenantName: z.string(),
    quotas: Quota,
    allowedModels: z.array(z.string()).describe("Extension: the models this tenant may generate with (its administrator's allowlist)"),
    modelId: z.string().describe("Extension: the tenant's default model (used when a request names none); one of allowedModels"),
  }),
});

// ---- webhooks ----

export const Webhook = z.object({
  id: id(),
  url: z.string(),
  events: z.array(z.string()),
  description: nstr(),
  enabled: z.boolean(),
  disabledReason: nstr(),
  consecutiveFailures: int(),
  lastDeliveryAt: ts().nullable(),
  lastDeliveryStatus: nstr(),
  lastResponseStatus: int().nullable(),
  secretHint: z.string(),
  createdAt: ts(),
  updatedAt: ts(),
});
export const WebhookCreated = Webhook.extend({ secret: z.string().describe('whsec_...: shown once') });

/**
 * The bodies of webhook deliveries (SPEC 6 for the quota events; issue 37 for the others; also the payload of a
 * delivery record): small, ids and URLs only, snake_case like SPEC 6's. Each starts with the event's `id` (also
 * the webhook-id header: the same on every attempt, on every endpoint that receives the event and on a replay,
 * so receivers deduplicate on it), its `event` type, the `tenant_id` and the `timestamp` the event occurred at.
 */
const webhookEventId = () =>
  z.string().min(1).describe('The event id, also the webhook-id header: the same on retries, endpoints and replays (deduplicate on it)');
const apiUrl = (what: string) => z.string().describe(`${what} (PUBLIC_BASE_URL)`);

/** SPEC 6: quota.warning and quota.exceeded (`id` since issue 37: absent in older delivery records). */
export const QuotaWebhookPayload = z.object({
  id: webhookEventId().optional(),
  event: z.enum(QUOTA_EVENTS),
  threshold: int().describe('80 or 100 (percent)'),
  tenant_id: z.string(),
  billing_period: z.string().regex(/^\d{4}-\d{2}$/),
  current_usage_mb: z.number(),
  quota_mb: z.number(),
  timestamp: ts(),
  webhook_id: id().optional(),
});
/** generation.completed, generation.failed and generation.cancelled: an execution ended (generation's ExecutionFinished). */
export const GenerationWebhookPayload = z.object({
  id: webhookEventId(),
  event: z.enum(GENERATION_EVENTS),
  tenant_id: z.string(),
  timestamp: ts(),
  execution_id: z.string(),
  session_id: z.string(),
  tool_name: z.string().describe('The operation, e.g. generate_image, edit_image, generate_character_image'),
  status: z.enum(['completed', 'failed', 'cancelled']),
  duration_ms: int(),
  image_ids: z.array(id()).describe('The images it made (completed; empty otherwise)'),
  execution_url: apiUrl('GET /api/executions/:executionId'),
  image_urls: z.array(z.string()).describe('GET /api/images/:id of each image, in the order of image_ids'),
  error: nstr().describe('Why it failed (generation.failed); null otherwise'),
});
/** image.stored: an image was stored and listed (library's ImageStored; generated, edited, uploaded or a reference). */
export const ImageStoredWebhookPayload = z.object({
  id: webhookEventId(),
  event: z.literal('image.stored'),
  tenant_id: z.string(),
  timestamp: ts(),
  image_id: id(),
  session_id: z.string(),
  operation: z.string().describe('How it was made, e.g. generate, edit, upload'),
  image_url: apiUrl('GET /api/images/:id'),
});
/** image.deleted: an image was deleted (library's ImageDeleted). */
export const ImageDeletedWebhookPayload = z.object({
  id: webhookEventId(),
  event: z.literal('image.deleted'),
  tenant_id: z.string(),
  timestamp: ts(),
  image_id: id(),
  image_url: apiUrl('GET /api/images/:id (now 404)'),
});
/** POST /api/webhooks/:id/test (`id`, the delivery's, since issue 37). */
export const TestWebhookPayload = z.object({
  id: webhookEventId().optional(),
  event: z.literal('webhook.test'),
  tenant_id: z.string(),
  timestamp: ts(),
  webhook_id: id(),
});

export const Delivery = z.object({
  id: z.string(),
  webhookId: id(),
  event: z.string(),
  status: z.string(),
  attemptCount: int(),
  attempts: z.array(z.object({ attempt: int(), attemptedAt: ts(), durationMs: int(), responseStatus: int().nullable(), error: nstr() })),
  eventId: z.string().describe("The event's id: the webhook-id header and the payload's id (a replay keeps it)"),
  replayOf: nstr().describe('A replay: the id of the delivery it repeats'),
  payload: z.union([
    GenerationWebhookPayload,
    ImageStoredWebhookPayload,
    ImageDeletedWebhookPayload,
    QuotaWebhookPayload,
    TestWebhookPayload,
  ]),
  lastError: nstr(),
  lastResponseStatus: int().nullable(),
  nextAttemptAt: ts().nullable(),
  createdAt: ts(),
  completedAt: ts().nullable(),
});

// ---- administration ----

export const Tenant = z.object({
  tenantId: z.string(),
  tenantName: z.string(),
  isActive: z.boolean(),
  contactEmail: z.string(),
  monthlyQuotaMb: int(),
  rateLimitPerMinute: int(),
  notes: nstr(),
  modelId: z.string(),
  allowedModels: z.array(z.string()),
  credentialsIncludePrompt: z.boolean().describe("Extension: the prompt is written into the images' signed C2PA manifests"),
  createdAt: ts(),
  updatedAt: ts(),
});

export const ApiKeyRecord = z.object({
  keyId: z.string(),
  apiKey: z.string().describe('abbreviated'),
  keyName: z.string(),
  type: z.enum(['live', 'test']),
  isActive: z.boolean(),
  createdAt: ts(),
  lastUsedAt: ts().nullable(),
  revokedAt: ts().nullable(),
  usageCount: int(),
  signatureRequired: z.boolean().describe('every request with this key must carry X-Signature and X-Timestamp (extension)'),
});
export const CreatedApiKey = z.object({
  keyId: z.string(),
  apiKey: z.string().describe('the full key: returned once'),
  keyName: z.string(),
  type: z.enum(['live', 'test']),
  createdAt: ts(),
});

const providerPool = z.object({ configured: z.boolean(), keyCount: int() });
export const TenantDetail = z.object({
  tenant: Tenant,
  apiKeys: z.array(ApiKeyRecord),
  providerCredentials: z.object({ provA: providerPool, provB: providerPool }),
});
export const TenantCreated = z.object({ tenant: Tenant, apiKeys: z.array(CreatedApiKey) });
/** A key's signed-request state (SPEC 5.8, extension). */
export const ApiKeySigning = z.object({
  keyId: z.string(),
  keyName: z.string(),
  signatureRequired: z.boolean(),
  signingSecret: nstr().describe(
    'the signing secret (the HMAC-SHA256 key, the whole string as UTF-8): only in the answer that made it (turning signatures on, a rotation), never again; else null',
  ),
  secretCreatedAt: ts().nullable(),
  previousSecretExpiresAt: ts().nullable().describe('after a rotation: until when the previous secret is still accepted'),
});

export const AdminUser = z.object({
  userId: z.string(),
  email: z.string(),
  displayName: z.string(),
  role: z.enum(ADMIN_ROLES),
  tenantId: nstr(),
  isActive: z.boolean(),
  isLocked: z.boolean(),
  failedLoginAttempts: int(),
  lastLoginAt: ts().nullable(),
  createdAt: ts(),
  updatedAt: ts(),
});
export const AdminSession = z.object({ token: z.string(), tokenType: z.literal('Bearer'), expiresAt: ts(), user: AdminUser });
export const AdminMe = z.object({
  authMethod: z.string(),
  role: z.enum(ADMIN_ROLES),
  sessionExpiresAt: ts().nullable(),
  user: AdminUser.nullable(),
});

export const Invitation = z.object({
  token: z.string(),
  email: z.string(),
  tenantId: nstr(),
  role: z.enum(ADMIN_ROLES),
  status: z.string(),
  invitedBy: nstr().describe('The admin user who invited, or admin_token'),
  expiresAt: ts(),
  createdAt: ts(),
  acceptedAt: ts().nullable(),
  revokedAt: ts().nullable(),
});
/** One audit log record (issue 40, item 5): who did what to which target, and what it changed (never a secret). */
export const AuditRecord = z.object({
  id: z.string().describe('Increasing with time'),
  at: ts(),
  actorType: z.enum(['admin_user', 'admin_token', 'tenant', 'anonymous']),
  actor: z
    .string()
    .describe("The admin user id, 'admin-token', the tenant id, or for an anonymous OAuth client 'oauth-client:<client_id>'"),
  actorRole: nstr().describe('admin or super_admin for admin actors'),
  action: z.string().describe('The operationId of the operation (e.g. updateTenant), or registerOAuthClient / revokeOAuthToken'),
  tenantId: nstr().describe('The tenant the operation targeted'),
  resourceId: nstr().describe('The resource the operation targeted (its path parameters, or the created resource)'),
  requestId: z.string().describe('The X-Request-Id of the request'),
  changes: z
    .record(z.unknown())
    .describe('The fields the request set, with their new values; a secret (password, key, token, credential) is "[redacted]"'),
});
export const AuditLogPagination = z.object({
  limit: int(),
  hasMore: z.boolean(),
  nextCursor: nstr().describe('pass as cursor to continue after this page; null on the last page'),
});

export const InvitationCreated = Invitation.pick({
  token: true,
  email: true,
  role: true,
  tenantId: true,
  expiresAt: true,
  createdAt: true,
  status: true,
});
export const InvitationPublic = Invitation.pick({ email: true, role: true, tenantId: true, expiresAt: true, status: true });

export const AdminStats = z.object({
  generatedAt: ts(),
  tenants: z.object({ total: int(), active: int(), inactive: int(), createdLast30Days: int() }),
  images: z.object({ total: int(), last24h: int() }).nullable().describe('null when usage metering is unavailable'),
  storage: z.object({ totalBytes: int(), totalMb: z.number() }).nullable(),
  recentActivity: z.object({ imagesLast24h: int(), operationsLast24h: int() }).nullable(),
  topTenants: z.array(z.object({ tenantId: z.string(), tenantName: nstr(), images: int(), bytes: int(), mb: z.number() })),
  usage: z.object({ status: z.enum(['ok', 'unavailable']), error: z.string().optional() }),
  health: z.object({
    status: z.enum(['ok', 'degraded']),
    services: z.array(
      z.object({
        name: z.string(),
        status: z.enum(['up', 'down', 'not_configured']),
        latencyMs: int().nullable(),
        error: z.string().optional(),
      }),
    ),
  }),
});

export const Health = z.object({
  status: z.literal('ok'),
  timestamp: ts(),
  version: z.string().describe("Extension: the product's version (semver, the root package.json's; CHANGELOG.md)"),
  commit: z.string().describe("Extension: the git commit the process runs, or 'unknown'"),
});

// ---- answers only the MCP tools give (no REST twin), built from the resources above ----

/** delete_image (REST answers 204 without a body). */
export const ImageDeleted = z.object({ deleted: z.literal(true), id: id() });

/** download_images: what each returned image content is (the bytes travel as MCP image content). */
export const DownloadedImages = z.object({
  images: z.array(
    Image.pick({ id: true, fullUrl: true, thumbnailUrl: true }).extend({
      mimeType: z.string(),
      sizeBytes: int().describe('of the returned bytes (the thumbnail with thumbnails: true)'),
    }),
  ),
});

/** generate_image with async: true: the queued job (issue 37). */
export const GenerationStarted = z.object({
  executionId: z.string(),
  status: z.literal('queued'),
  position: int().min(1),
  session_id: z.string(),
  message: z.string(),
});

/** wait_for_execution: the execution and, once done, its images (or the full result of an async generate_image). */
export const ExecutionWait = z.object({
  done: z.boolean(),
  execution: Execution,
  result: z
    .union([GenerateResult, z.object({ images: z.array(SessionImage) })])
    .optional()
    .describe('when done: the generate_image result, or the images the execution produced'),
  message: z.string().optional().describe('when not done yet'),
});

/** list_models. */
export const ModelList = z.object({
  defaultModel: z.string(),
  models: z.array(
    z.object({
      model_id: z.enum(MODEL_IDS),
      provider: z.enum(PROVIDERS),
      notes: z.string(),
      allowed: z.boolean(),
      default: z.boolean(),
    }),
  ),
});

export type ImageJson = z.infer<typeof Image>;
export type ImageDetailJson = z.infer<typeof ImageDetail>;
export type ImageCredentialsJson = z.infer<typeof ImageCredentials>;
export type SessionImageJson = z.infer<typeof SessionImage>;
export type GeneratedImageJson = z.infer<typeof GeneratedImage>;
export type CharacterJson = z.infer<typeof Character>;
export type CharacterListItemJson = z.infer<typeof CharacterListItem>;
export type ProductJson = z.infer<typeof Product>;
export type ProductDetailJson = z.infer<typeof ProductDetail>;
export type SceneJson = z.infer<typeof Scene>;
export type SceneListItemJson = z.infer<typeof SceneListItem>;
export type StylePresetJson = z.infer<typeof StylePreset>;
export type SearchPresetJson = z.infer<typeof SearchPreset>;
export type ExecutionJson = z.infer<typeof Execution>;
export type UsageMonthJson = z.infer<typeof UsageMonth>;
export type QuotaJson = z.infer<typeof Quota>;
export type WebhookJson = z.infer<typeof Webhook>;
export type CharacterGenerateResultJson = z.infer<typeof CharacterGenerateResult>;

/** A tenant's data export (extension, issue 40, item 4): a job, then a ZIP kept for EXPORT_RETENTION_DAYS. */
export const TenantExport = z.object({
  exportId: z.string(),
  tenantId: z.string(),
  status: z.enum(['queued', 'running', 'completed', 'failed', 'expired']),
  phase: z.enum(['data', 'files', 'done']).describe('data: the JSON document; files: the images and thumbnails'),
  itemsDone: z.number().int().describe('Rows written (data) or files written (files)'),
  itemsTotal: z.number().int().describe('Files to write (known once the data phase ended)'),
  sizeBytes: z.number().int().describe("The ZIP's size once completed"),
  error: z.string().nullable(),
  createdAt: ts(),
  updatedAt: ts(),
  completedAt: ts().nullable(),
  expiresAt: ts().nullable().describe('When the ZIP is removed'),
  downloadUrl: z.string().nullable().describe('The ZIP, once completed'),
});

/** What a tenant's purge removed (extension, issue 40, item 4). */
export const TenantPurgeResult = z.object({
  tenantId: z.string(),
  status: z.literal('purged'),
  startedAt: ts(),
  completedAt: ts(),
  rowsRemoved: z.record(z.string(), z.number().int()).describe('Per schema.table, over every run of the purge'),
  objectsRemoved: z.number().int(),
  redisKeysRemoved: z.number().int(),
  kept: z.array(z.string()).describe('What is left of the tenant: its audit records'),
});
