import { IMAGES_PER_SESSION_MAX, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, MAX_BULK_DELETE, SESSION_ID_MAX } from '@imagegen/api-schemas/vocab';
import type { EditHistoryEntry, ImageRecord, LibraryServiceService, SessionSummary } from '@imagegen/contracts/library/v1/library';
import { imageJson } from '@imagegen/operations';
import {
  badRequest,
  type CallContext,
  type DirectPublisher,
  forbidden,
  type Handlers,
  invalidPayload,
  notFound,
  type Principal,
  recordSessionJsonCache,
  type ServiceContext,
  type Sql,
  validateKey,
} from '@imagegen/platform';
import type { ContentCredentials } from './credentials/content-credentials.js';
import { cursorKey as makeCursorKey } from './images/cursor.js';
import { type ImageListFilters, type ListPageInfo, listImages, listImagesJson } from './images/list-query.js';
import { objectServable } from './images/object-gc.js';
import { commitExecutionImages } from './images/pending.js';
import {
  deleteImage,
  deleteImages,
  editHistory,
  getImage,
  resolveImages,
  sessionImages,
  sessionImagesJson,
  sessionImagesJsonParts,
} from './images/store.js';
import { storeImage } from './images/store-image.js';
import { type ImageRow, toImageRecord } from './images/types.js';
import { assembleSessionJson, SessionJsonCache } from './sessions/json-cache.js';
import { getSession, listSessions, type SessionSummaryRow, touchSession } from './sessions/store.js';

export const MAX_RESOLVE_IDS = 1000;
/** A session's images, all of them (a session holds at most IMAGES_PER_SESSION_MAX). */
export const MAX_SESSION_IMAGES_LISTED = IMAGES_PER_SESSION_MAX;

/**
 * The tenant a call acts for: the principal's, or an explicit tenant_id (StoreImage, TouchSession) for
 * callers without one. A tenant principal can never act for another tenant (isolation, SPEC 1 rule 5).
 */
function tenantOf(p: Principal, explicit?: string): string {
  if (explicit && p.tenantId && explicit !== p.tenantId) throw forbidden('tenant_id does not match the calling tenant');
  const t = explicit || p.tenantId;
  if (!t) throw badRequest('Tenant is required');
  return t;
}

function historyEntry(row: ImageRow, ctx: ServiceContext): EditHistoryEntry {
  return {
    id: row.id,
    operation: row.operation,
    prompt: row.prompt,
    parentImageId: row.parentImageId ?? undefined,
    createdAt: row.createdAt.toISOString(),
    fullUrl: ctx.storage.publicUrl(row.objectKey),
    thumbnailUrl: ctx.storage.publicUrl(row.thumbnailKey),
  };
}

function sessionSummary(s: SessionSummaryRow): SessionSummary {
  return {
    sessionId: s.sessionId,
    tenantId: s.tenantId,
    isActive: s.isActive,
    createdAt: s.createdAt.toISOString(),
    lastActivityAt: s.lastActivityAt.toISOString(),
    totalImages: s.totalImages,
    totalEdits: s.totalEdits,
    totalBytes: s.totalBytes,
    totalTokens: s.totalTokens,
  };
}

export function libraryHandlers(deps: {
  sql: Sql;
  ctx: ServiceContext;
  outbox?: DirectPublisher;
  credentials: ContentCredentials;
}): Handlers<typeof LibraryServiceService> {
  const { sql, ctx, outbox } = deps;
  const record = (row: ImageRow): ImageRecord => toImageRecord(row, ctx.storage);
  const { key: cursorKey, ephemeral } = makeCursorKey(ctx.config);
  const sessionJson = new SessionJsonCache(ctx.config.sessionJsonCacheMb * 1024 * 1024);
  /**
   * The session and its images' JSON (undefined when a key is not plain: records then). A kept rendering is served
   * when the session's version has not moved since; when it moved, only the images it lacks are rendered. A session
   * not kept is read and rendered whole, side by side.
   */
  const sessionDetailJson = async (tenantId: string, sessionId: string) => {
    const prefix = ctx.storage.plainKeyUrlPrefix;
    const kept = sessionJson.peek(tenantId, sessionId, prefix);
    if (!kept) {
      recordSessionJsonCache('miss');
      const [session, whole] = await Promise.all([
        getSession(sql, tenantId, sessionId),
        sessionImagesJson(sql, tenantId, sessionId, MAX_SESSION_IMAGES_LISTED, prefix),
      ]);
      if (!whole) return undefined;
      sessionJson.set(tenantId, sessionId, prefix, whole);
      return { session, images: whole.json, version: whole.version };
    }
    const session = await getSession(sql, tenantId, sessionId);
    const same = sessionJson.get(tenantId, sessionId, prefix, session.imagesVersion);
    recordSessionJsonCache(same === undefined ? 'miss' : 'hit');
    if (same !== undefined) return { session, images: same, version: session.imagesVersion };
    const parts = (known: string[]) => sessionImagesJsonParts(sql, tenantId, sessionId, MAX_SESSION_IMAGES_LISTED, prefix, known);
    const rendered = await parts(kept.parts ? [...kept.parts.keys()] : []);
    // assembleSessionJson fails only if a known image were missing from the entry: then all are rendered.
    let entry = rendered && assembleSessionJson(rendered, kept);
    if (rendered && !entry) {
      const all = await parts([]);
      entry = all && assembleSessionJson(all);
    }
    if (!entry) return undefined;
    sessionJson.set(tenantId, sessionId, prefix, entry);
    return { session, images: entry.json, version: entry.version };
  };
  if (ephemeral) ctx.logger.warn('neither CURSOR_KEY nor CREDENTIALS_KEY is set: image list cursors are valid in this process only');
  // The call's logger is a child made on first use (most calls never log): the write paths get it lazily too.
  const writeDeps = (call: CallContext) => ({
    sql,
    storage: ctx.storage,
    config: ctx.config,
    outbox,
    credentials: deps.credentials,
    get logger() {
      return call.logger;
    },
  });

  return {
    async storeImage(req, call) {
      const { principal } = call;
      const tenantId = tenantOf(principal, req.tenantId);
      const row = await storeImage(writeDeps(call), {
        tenantId,
        sessionId: req.sessionId,
        data: req.data,
        mimeType: req.mimeType,
        prompt: req.prompt,
        negativePrompt: req.negativePrompt ?? null,
        operation: req.operation,
        aspectRatio: req.aspectRatio,
        modelId: req.modelId,
        resolutionTier: req.resolutionTier,
        parentImageId: req.parentImageId ?? null,
        stylePresetId: req.stylePresetId ?? null,
        productReferenceId: req.productReferenceId ?? null,
        characterId: req.characterId ?? null,
        referenceGroupIds: req.referenceGroupIds.length > 0 ? req.referenceGroupIds : null,
        isReference: req.isReference,
        executionId: req.executionId || null,
        hasSynthid: req.hasSynthid,
        keyType: req.keyType || principal.keyType || 'live',
        tokens: req.tokens,
        pending: req.pending,
        referenceObjectKeys: req.referenceObjectKeys,
        credentialsIncludePrompt: req.credentialsIncludePrompt,
      });
      return record(row);
    },

    async getImageCredentials(req, { principal }) {
      const row = await getImage(sql, tenantOf(principal), req.imageId);
      const data = await ctx.storage.get(row.objectKey).catch((err) => {
        if ((err as { status?: number }).status === 404) throw notFound('Image not found');
        throw err;
      });
      const report = await deps.credentials.read(data, row.mimeType);
      return {
        imageId: row.id,
        present: report.present,
        validationState: report.validationState ?? undefined,
        issuer: report.issuer ?? undefined,
        manifestStoreJson: JSON.stringify(report.manifestStore),
      };
    },

    async commitExecutionImages(req, call) {
      const { principal } = call;
      const tenantId = tenantOf(principal, req.tenantId);
      if (!req.executionId) throw invalidPayload(['execution_id is required']);
      const committed = await commitExecutionImages(writeDeps(call), tenantId, req.executionId, req.imageIds);
      return { committed };
    },

    async getImageData(req, { principal }) {
      const row = await getImage(sql, tenantOf(principal), req.imageId);
      const data = await ctx.storage.get(row.objectKey).catch((err) => {
        if ((err as { status?: number }).status === 404) throw notFound('Image not found');
        throw err;
      });
      return { image: record(row), data, mimeType: row.mimeType };
    },

    async getObjectData(req, { principal }) {
      const tenantId = tenantOf(principal);
      const key = req.objectKey;
      let valid = false;
      try {
        validateKey(key);
        valid = key.startsWith(`tenants/${tenantId}/`);
      } catch {}
      if (!valid) throw notFound('Object not found');
      const [data, st] = await Promise.all([ctx.storage.get(key), ctx.storage.stat(key)]);
      return { data, mimeType: st?.contentType ?? 'application/octet-stream' };
    },

    async objectServable(req) {
      return { servable: await objectServable(sql, req.objectKey) };
    },

    async listImages(req, { principal, signal, deadline }) {
      const filters: ImageListFilters = {
        search: req.search,
        searchMode: req.searchMode as ImageListFilters['searchMode'],
        dateFrom: req.dateFrom,
        dateTo: req.dateTo,
        aspectRatio: req.aspectRatio,
        operationType: req.operationType,
        minSize: req.minSize,
        maxSize: req.maxSize,
        sessionId: req.sessionId,
        hasNegativePrompt: req.hasNegativePrompt,
        modelId: req.modelId,
        resolutionTier: req.resolutionTiers.length > 0 ? req.resolutionTiers : undefined,
        stylePresetId: req.stylePresetId,
        productReferenceId: req.productReferenceId,
        isReference: req.isReference,
        sortBy: req.sortBy as ImageListFilters['sortBy'],
      };
      const page = { limit: req.limit, offset: req.offset, cursor: req.cursor };
      // The SQL stops when the caller goes away or the deadline passes (issue 16).
      const opts = { cursorKey, signal, deadline };
      const info = (p: ListPageInfo) => ({
        total: p.total,
        totalIsExact: p.totalIsExact,
        nextCursor: p.nextCursor,
        limit: p.limit,
        offset: p.offset,
      });
      if (req.asJson) {
        const j = await listImagesJson(sql, tenantOf(principal), filters, page, ctx.storage.plainKeyUrlPrefix, opts);
        if (j.json !== undefined) return { images: [], pageJson: Buffer.from(j.json), ...info(j) };
      }
      const r = await listImages(sql, tenantOf(principal), filters, page, opts);
      if (req.asJson) {
        const pageJson = Buffer.from(JSON.stringify(r.rows.map((row) => imageJson(record(row)))));
        return { images: [], pageJson, ...info(r) };
      }
      return { images: r.rows.map(record), pageJson: Buffer.alloc(0), ...info(r) };
    },

    async getImage(req, { principal }) {
      const row = await getImage(sql, tenantOf(principal), req.imageId);
      const h = await editHistory(sql, row);
      return {
        image: record(row),
        ancestors: h.ancestors.map((r) => historyEntry(r, ctx)),
        edits: h.edits.map((r) => historyEntry(r, ctx)),
      };
    },

    async resolveImages(req, { principal }) {
      if (req.imageIds.length > MAX_RESOLVE_IDS) throw badRequest('Too many image ids', [`at most ${MAX_RESOLVE_IDS} ids`]);
      const r = await resolveImages(sql, tenantOf(principal), req.imageIds);
      return { images: r.rows.map(record), missingIds: r.missing };
    },

    async deleteImage(req, call) {
      const { principal } = call;
      const row = await deleteImage(writeDeps(call), tenantOf(principal), req.imageId);
      return { id: row.id };
    },

    async deleteImages(req, call) {
      const { principal } = call;
      if (req.imageIds.length > MAX_BULK_DELETE) throw badRequest('Too many image ids', [`at most ${MAX_BULK_DELETE} ids`]);
      return deleteImages(writeDeps(call), tenantOf(principal), req.imageIds);
    },

    async touchSession(req, { principal }) {
      const s = await touchSession(sql, tenantOf(principal, req.tenantId), req.sessionId);
      return { sessionId: s.sessionId, imageCount: s.imageCount, remaining: s.remaining, created: s.created };
    },

    async listSessions(req, { principal }) {
      const limit = !req.limit || req.limit < 1 ? LIST_LIMIT_DEFAULT : Math.min(req.limit, LIST_LIMIT_MAX);
      const offset = Math.max(req.offset || 0, 0);
      const r = await listSessions(sql, tenantOf(principal), { limit, offset, cursor: req.cursor }, cursorKey);
      const { total, totalIsExact, nextCursor } = r;
      return { sessions: r.sessions.map(sessionSummary), total, totalIsExact, nextCursor, limit, offset };
    },

    async getSession(req, { principal }) {
      const tenantId = tenantOf(principal);
      if (!req.sessionId || req.sessionId.length > SESSION_ID_MAX) throw notFound('Session not found');
      // A missing session answers 404 whatever the images' query found (getSession throws).
      if (req.sessionOnly)
        return {
          session: sessionSummary(await getSession(sql, tenantId, req.sessionId)),
          images: [],
          imagesJson: Buffer.alloc(0),
          imagesVersion: '',
        };
      if (req.asJson) {
        const json = await sessionDetailJson(tenantId, req.sessionId);
        if (json !== undefined)
          return { session: sessionSummary(json.session), images: [], imagesJson: json.images, imagesVersion: json.version };
      }
      const s = await getSession(sql, tenantId, req.sessionId);
      const rows = await sessionImages(sql, tenantId, req.sessionId, MAX_SESSION_IMAGES_LISTED);
      return { session: sessionSummary(s), images: rows.map(record), imagesJson: Buffer.alloc(0), imagesVersion: '' };
    },
  };
}
