import type * as Api from '@imagegen/api-schemas';
import { allowedModelsOf, defaultModelFor } from '@imagegen/api-schemas/vocab';
import type {
  EditImageResponse,
  Execution,
  GeneratedImage,
  GenerateImagesResponse,
  UploadForEditingResponse,
} from '@imagegen/contracts/generation/v1/generation';
import type { Character, Product, Scene, SearchPreset, StylePreset } from '@imagegen/contracts/library/v1/assets';
import type {
  EditHistoryEntry,
  GetImageCredentialsResponse,
  ImageDetail,
  ImageRecord,
  SessionSummary,
} from '@imagegen/contracts/library/v1/library';
import type { GetUsageResponse, Quota } from '@imagegen/contracts/usage/v1/usage';
import type { CreateWebhookResponse, Webhook } from '@imagegen/contracts/webhooks/v1/webhooks';
import type { z } from 'zod';

/** The JSON type of a resource schema of @imagegen/api-schemas. */
type Json<K extends keyof typeof Api> = (typeof Api)[K] extends z.ZodTypeAny ? z.infer<(typeof Api)[K]> : never;

/**
 * How each resource's JSON form (SPEC 2: field names and case per resource) is built from the gRPC messages,
 * used by the gateway's REST routes and the mcp tools alike. Every function returns the type of its schema in
 * @imagegen/api-schemas (the one definition the OpenAPI document and the MCP outputSchemas derive from), so a
 * field added here and not there (or the reverse) fails the typecheck.
 */

export function imageJson(r: ImageRecord): Json<'Image'> {
  return {
    id: r.id,
    sessionId: r.sessionId,
    fullUrl: r.fullUrl,
    thumbnailUrl: r.thumbnailUrl,
    width: r.width,
    height: r.height,
    sizeBytes: r.sizeBytes,
    prompt: r.prompt,
    negativePrompt: r.negativePrompt ?? null,
    operation: r.operation,
    aspectRatio: r.aspectRatio,
    createdAt: r.createdAt,
  };
}

function detailFields(r: ImageRecord): z.infer<typeof Api.ImageDetailFields> {
  return {
    modelId: r.modelId,
    stylePresetId: r.stylePresetId ?? null,
    productReferenceId: r.productReferenceId ?? null,
    referenceGroupIds: r.hasReferenceGroupIds ? r.referenceGroupIds : null,
    parent_image_id: r.parentImageId ?? null,
    resolutionTier: r.resolutionTier || null,
    format: r.format,
    mimeType: r.mimeType,
    isReference: r.isReference,
  };
}

function historyJson(e: EditHistoryEntry): Json<'EditHistoryEntry'> {
  return {
    id: e.id,
    operation: e.operation,
    prompt: e.prompt,
    parent_image_id: e.parentImageId ?? null,
    createdAt: e.createdAt,
    fullUrl: e.fullUrl,
    thumbnailUrl: e.thumbnailUrl,
  };
}

/*
 * Forms built from parts use Object.assign, not object spread: on Node 20 an object literal that starts with a spread
 * (`{ ...a, x }`) takes V8's slow path, several times slower per object than Object.assign (docs/BENCHMARKS.md); a session of
 * 1,000 images or a page of 50 characters paid milliseconds for it. Keys keep the same order either way. Each part
 * `satisfies` its form's type, so a field the schema lacks still fails the typecheck (Object.assign's result alone
 * would not be checked for extra fields).
 */

export function imageDetailJson(d: ImageDetail): Json<'ImageDetail'> {
  const r = d.image as ImageRecord;
  return Object.assign(imageJson(r), detailFields(r), {
    editHistory: { ancestors: d.ancestors.map(historyJson), edits: d.edits.map(historyJson) },
    contentCredentials: contentCredentialsJson(r),
  } satisfies Partial<Json<'ImageDetail'>>);
}

/** (extension, issue 39) What the row recorded at store time: no file is read. */
export function contentCredentialsJson(r: ImageRecord): Json<'ImageDetail'>['contentCredentials'] {
  return { present: r.credentialsState !== undefined, validationState: r.credentialsState ?? null, issuer: r.credentialsIssuer ?? null };
}

/** (extension, issue 39) GET /api/images/:id/credentials and MCP get_image_credentials. */
export function imageCredentialsJson(c: GetImageCredentialsResponse): Json<'ImageCredentials'> {
  return {
    imageId: c.imageId,
    present: c.present,
    validationState: c.validationState ?? null,
    issuer: c.issuer ?? null,
    manifestStore: JSON.parse(c.manifestStoreJson || 'null') as Record<string, unknown> | null,
  };
}

export function sessionImageJson(r: ImageRecord): Json<'SessionImage'> {
  return Object.assign(imageJson(r), detailFields(r), {
    thumbnailSizeBytes: r.thumbnailSizeBytes,
    objectKey: r.objectKey,
    objectThumbnailKey: r.thumbnailKey,
  } satisfies Partial<Json<'SessionImage'>>);
}

/** SPEC 2 "Generated image" (snake_case), plus a few fields useful to clients; REST and MCP alike. */
export function generatedImageJson(g: GeneratedImage): Json<'GeneratedImage'> {
  return {
    record_id: g.recordId,
    full_url: g.fullUrl,
    thumbnail_url: g.thumbnailUrl,
    width: g.width,
    height: g.height,
    size_bytes: g.sizeBytes,
    format: g.format,
    prompt: g.prompt,
    negative_prompt: g.negativePrompt ?? null,
    has_synthid: g.hasSynthid,
    created_at: g.createdAt,
    mime_type: g.mimeType,
    aspect_ratio: g.aspectRatio,
    model_id: g.modelId,
    resolution_tier: g.resolutionTier,
    parent_image_id: g.parentImageId ?? null,
  };
}

/** POST /api/images and generate_image: the images made, what was asked and made, the session and execution. */
export function generateResultJson(r: GenerateImagesResponse): Json<'GenerateResult'> {
  return {
    images: r.images.map(generatedImageJson),
    metadata: { requested: r.requested, generated: r.generated, session_id: r.sessionId },
    executionId: r.executionId,
  };
}

/** The fields the generation answers of characters and products start with: their first image. */
function firstImage(res: GenerateImagesResponse) {
  const img = res.images[0];
  return {
    imageId: img.recordId,
    sessionId: res.sessionId,
    fullUrl: img.fullUrl,
    thumbnailUrl: img.thumbnailUrl,
    width: img.width,
    height: img.height,
    prompt: img.prompt,
  };
}

/** The answer of POST /api/products/:identifier/generate (and the MCP tool): the first image plus all of them. */
export function productImagesJson(
  res: GenerateImagesResponse,
  product: Product,
  scenePrompt: string | undefined,
): Json<'ProductGenerateResult'> {
  const first = res.images[0];
  return Object.assign(firstImage(res), {
    format: first.format,
    sizeBytes: first.sizeBytes,
    productId: product.id,
    productName: product.productName,
    scenePrompt,
    images: res.images.map((i) => ({ id: i.recordId, url: i.fullUrl, thumbnail_url: i.thumbnailUrl })),
    message: `Generated ${res.images.length} image${res.images.length === 1 ? '' : 's'} of ${product.productName}`,
  });
}

/**
 * The answer of POST /api/characters/:identifier/generate (and the MCP tool generate_character_image): the
 * first image; its thumbnail size comes from the library record (GeneratedImage does not carry it).
 */
export function characterImageJson(
  res: GenerateImagesResponse,
  characterName: string,
  thumbnailSizeBytes: number,
): Json<'CharacterGenerateResult'> {
  const img = res.images[0];
  return Object.assign(firstImage(res), {
    objectKey: img.objectKey,
    format: img.format,
    sizeBytes: img.sizeBytes,
    thumbnailSizeBytes,
    message: `Generated an image of ${characterName}`,
  });
}

/** The answer of POST /api/characters/generate-multi (and the MCP tool). */
export function multiCharacterImageJson(res: GenerateImagesResponse, characterCount: number): Json<'MultiCharacterResult'> {
  return Object.assign(firstImage(res), {
    characterCount,
    message: `Generated an image with ${characterCount} characters`,
  });
}

/** The fields every form of a character starts with (SPEC 2 "Character", snake_case). */
function characterHead(c: Character) {
  return {
    id: c.id,
    character_name: c.characterName,
    description: c.description ?? null,
    base_prompt: c.basePrompt,
    negative_prompt: c.negativePrompt ?? null,
    system_instruction: c.systemInstruction ?? null,
  } satisfies Partial<Json<'Character'>>;
}

function characterUsage(c: Character) {
  return {
    times_used: c.timesUsed,
    created_at: c.createdAt,
    updated_at: c.updatedAt,
    last_used_at: c.lastUsedAt ?? null,
  } satisfies Partial<Json<'Character'>>;
}

export function characterListForm(c: Character): Json<'CharacterListItem'> {
  return Object.assign(
    characterHead(c),
    {
      preferred_aspect_ratio: c.preferredAspectRatio ?? null,
      tags: c.tags,
      reference_image_count: c.referenceImageCount,
      thumbnail_url: c.thumbnailUrl ?? null,
    } satisfies Partial<Json<'CharacterListItem'>>,
    characterUsage(c),
  );
}

export function characterDetail(c: Character): Json<'Character'> {
  return Object.assign(
    characterHead(c),
    {
      reference_images: c.referenceImages.map((r) => ({ id: r.id, url: r.url, thumbnail_url: r.thumbnailUrl })),
      preferred_aspect_ratio: c.preferredAspectRatio ?? null,
      tags: c.tags,
    } satisfies Partial<Json<'Character'>>,
    characterUsage(c),
  );
}

export function productListForm(p: Product): Json<'Product'> {
  return {
    id: p.id,
    productName: p.productName,
    productDescription: p.productDescription ?? null,
    productUrl: p.productUrl,
    tags: p.tags,
    timesUsed: p.timesUsed,
    lastUsedAt: p.lastUsedAt ?? null,
    createdAt: p.createdAt,
    updatedAt: p.updatedAt,
    fullUrl: p.fullUrl,
    thumbnailUrl: p.thumbnailUrl,
  };
}

/** The answer of POST /api/products (and the MCP tool create_product). */
export function productCreatedJson(p: Product): Json<'ProductCreated'> {
  return {
    id: p.id,
    productName: p.productName,
    productUrl: p.productUrl,
    objectKey: p.objectKey,
    objectThumbnailKey: p.objectThumbnailKey,
    width: p.width,
    height: p.height,
    sizeBytes: p.sizeBytes,
    thumbnailSizeBytes: p.thumbnailSizeBytes,
    format: p.format,
    message: 'Product created successfully',
  };
}

/** The answer of a product update (PATCH /api/products/:identifier and the MCP tool): what can change. */
export function productUpdateJson(p: Product): Json<'ProductUpdated'> {
  return { id: p.id, productName: p.productName, productDescription: p.productDescription ?? null, tags: p.tags, updatedAt: p.updatedAt };
}

export function productDetail(p: Product): Json<'ProductDetail'> {
  return Object.assign(productListForm(p), {
    width: p.width,
    height: p.height,
    sizeBytes: p.sizeBytes,
    format: p.format,
    mimeType: p.mimeType,
    objectKey: p.objectKey,
    objectThumbnailKey: p.objectThumbnailKey,
  } satisfies Partial<Json<'ProductDetail'>>);
}

/** The fields a scene's forms start with, and those after its reference images (the list form has none). */
const sceneHead = (s: Scene) =>
  ({
    id: s.id,
    sceneName: s.sceneName,
    description: s.description ?? null,
    scenePrompt: s.scenePrompt ?? null,
  }) satisfies Partial<Json<'Scene'>>;
const sceneTail = (s: Scene) =>
  ({
    defaultReferenceMode: (s.defaultReferenceMode ?? null) as Json<'Scene'>['defaultReferenceMode'],
    preferredAspectRatio: s.preferredAspectRatio ?? null,
    tags: s.tags,
    timesUsed: s.timesUsed,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
    lastUsedAt: s.lastUsedAt ?? null,
  }) satisfies Partial<Json<'Scene'>>;

export function sceneDetail(s: Scene): Json<'Scene'> {
  const referenceImages = s.referenceImages.map((r) => ({ id: r.id, objectKey: r.objectKey, url: r.url, thumbnailUrl: r.thumbnailUrl }));
  return Object.assign(sceneHead(s), { referenceImages } satisfies Partial<Json<'Scene'>>, sceneTail(s));
}

export function sceneListForm(s: Scene): Json<'SceneListItem'> {
  return Object.assign(sceneHead(s), sceneTail(s), {
    imageCount: s.imageCount,
    thumbnailUrl: s.thumbnailUrl ?? null,
  } satisfies Partial<Json<'SceneListItem'>>);
}

export function stylePresetForm(p: StylePreset): Json<'StylePreset'> {
  return {
    id: p.id,
    name: p.name,
    prompt: p.prompt ?? null,
    negative_prompt: p.negativePrompt ?? null,
    system_instruction: p.systemInstruction ?? null,
    aspect_ratio: p.aspectRatio ?? null,
    created_at: p.createdAt,
    updated_at: p.updatedAt,
  };
}

export function searchPresetForm(p: SearchPreset): Json<'SearchPreset'> {
  let filters: Record<string, unknown> = {};
  try {
    filters = JSON.parse(p.filtersJson || '{}');
  } catch {}
  return { id: p.id, tenantId: p.tenantId, presetName: p.presetName, filters, createdAt: p.createdAt, updatedAt: p.updatedAt };
}

const MB = 1024 * 1024;

/** SPEC 2 "Quota object" (integers). */
export function quotaJson(q: Quota | undefined): Json<'Quota'> {
  return {
    monthlyQuotaMb: q?.monthlyQuotaMb ?? 0,
    monthlyUsedMb: q?.monthlyUsedMb ?? 0,
    monthlyRemainingMb: q?.monthlyRemainingMb ?? 0,
    rateLimitPerMinute: q?.rateLimitPerMinute ?? 0,
  };
}

/** The `data` of GET /api/usage (and the MCP tool get_usage): SPEC 2 "Usage month" (snake_case), newest first. */
export function usageJson(r: GetUsageResponse): Json<'Usage'> {
  return {
    months: r.months.map((m) => ({
      month: m.month,
      total_operations: m.totalOperations,
      total_images: m.totalImages,
      total_bytes: m.totalBytes,
      total_mb: m.totalMb,
      avg_duration_ms: m.avgDurationMs,
    })),
    recent: { bytes: r.recent?.bytes ?? 0, images: r.recent?.images ?? 0 },
    quota: quotaJson(r.quota),
  };
}

/**
 * GET /api/profile (SPEC 4.7; also the MCP tool get_profile) from the tenant's record. Its models (an extension) are the ones generation applies:
 * the allowlist and the default a request without model_id gets.
 */
export function profileJson(
  tenant: { tenantId: string; tenantName: string; allowedModels: string[]; modelId: string },
  quota: Quota | undefined,
): Json<'Profile'> {
  const { tenantId, tenantName } = tenant;
  return {
    tenant: {
      tenantId,
      tenantName,
      quotas: quotaJson(quota),
      allowedModels: [...allowedModelsOf(tenant)],
      modelId: defaultModelFor(tenant),
    },
  };
}

/**
 * `pagination` of the lists with capped totals and cursors (images, search-preset images, sessions): the gRPC
 * answer's next_cursor is absent on the last page, null in JSON.
 */
export function cursorPagination(r: {
  total: number;
  limit: number;
  offset: number;
  totalIsExact: boolean;
  nextCursor?: string;
}): Json<'ImagePagination'> {
  return { total: r.total, limit: r.limit, offset: r.offset, totalIsExact: r.totalIsExact, nextCursor: r.nextCursor || null };
}

export function sessionJson(s: SessionSummary): Json<'SessionSummary'> {
  return {
    sessionId: s.sessionId,
    isActive: s.isActive,
    createdAt: s.createdAt,
    lastActivityAt: s.lastActivityAt,
    totalImages: s.totalImages,
    totalEdits: s.totalEdits,
    totalBytes: s.totalBytes,
    totalMegabytes: Math.round((s.totalBytes / MB) * 100) / 100,
    totalTokens: s.totalTokens,
  };
}

export function sessionRecordJson(s: SessionSummary): Json<'SessionRecord'> {
  return {
    session_id: s.sessionId,
    tenant_id: s.tenantId,
    is_active: s.isActive ? 1 : 0,
    created_at: s.createdAt,
    last_activity_at: s.lastActivityAt,
  };
}

/**
 * SPEC 2 "Execution"; logEntries only when the execution was read with its logs. Beyond the SPEC's fields:
 * `error` (why a failed execution failed, else null), `modelId` and each log entry's `level`.
 */
export function executionJson(e: Execution, withLogs = false): Json<'Execution'> | Json<'ExecutionDetail'> {
  return {
    executionId: e.executionId,
    sessionId: e.sessionId,
    toolName: e.toolName,
    toolSource: e.toolSource,
    status: e.status as Json<'Execution'>['status'],
    progressPercent: e.progressPercent,
    currentStep: e.currentStep,
    startedAt: e.startedAt,
    completedAt: e.completedAt ?? null,
    durationMs: e.durationMs ?? null,
    resultSummary: e.resultSummary ?? null,
    error: e.error ?? null,
    modelId: e.modelId || null,
    position: e.status === 'queued' && e.position > 0 ? e.position : null,
    cancelRequested: e.cancelRequested && (e.status === 'queued' || e.status === 'running'),
    ...(withLogs
      ? {
          logEntries: e.logEntries.map((l) => ({
            timestamp: l.timestamp,
            message: l.message,
            level: l.level as Json<'LogEntry'>['level'],
          })),
        }
      : {}),
  };
}

export function webhookJson(w: Webhook): Json<'Webhook'> {
  return {
    id: w.id,
    url: w.url,
    description: w.description ?? null,
    events: w.events,
    enabled: w.enabled,
    disabledReason: w.disabledReason ?? null,
    consecutiveFailures: w.consecutiveFailures,
    lastDeliveryStatus: w.lastDeliveryStatus ?? null,
    lastResponseStatus: w.lastResponseStatus ?? null,
    lastDeliveryAt: w.lastDeliveryAt ?? null,
    secretHint: w.secretHint,
    createdAt: w.createdAt,
    updatedAt: w.updatedAt,
  };
}

/** The answer of POST /api/edit-image (flat, camelCase; and the MCP tool): the edit of `sourceImageId`. */
export function editImageJson(r: EditImageResponse, sourceImageId: number): Json<'EditResult'> {
  const i = r.image as GeneratedImage;
  return {
    thumbnailUrl: i.thumbnailUrl,
    fullUrl: i.fullUrl,
    width: i.width,
    height: i.height,
    sizeBytes: i.sizeBytes,
    format: i.format,
    prompt: i.prompt,
    parentImageId: i.parentImageId ?? sourceImageId,
    recordId: i.recordId,
    createdAt: i.createdAt,
    aspectRatio: i.aspectRatio,
    sessionId: r.sessionId,
    executionId: r.executionId,
  };
}

/** The answer of POST /api/upload-for-editing (flat, snake_case; and the MCP tool). */
export function uploadForEditingJson(r: UploadForEditingResponse): Json<'UploadResult'> {
  return {
    image_id: r.imageId,
    object_key: r.objectKey,
    public_url: r.publicUrl,
    size_bytes: r.sizeBytes,
    mime_type: r.mimeType,
    message: r.message,
    width: r.width,
    height: r.height,
    thumbnail_url: r.thumbnailUrl,
    session_id: r.sessionId,
    execution_id: r.executionId,
  };
}

/** A created webhook with its signing secret (shown this once). */
export function webhookCreatedJson(r: CreateWebhookResponse): Json<'WebhookCreated'> {
  return { ...webhookJson(r.webhook as Webhook), secret: r.secret };
}
