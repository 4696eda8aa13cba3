import type {
  CreateSceneRequest,
  DeleteSceneResponse,
  GetAssetRequest,
  ListScenesRequest,
  ListScenesResponse,
  Scene,
  UpdateSceneRequest,
} from '@imagegen/contracts/library/v1/assets';
import {
  type AppError,
  badRequest,
  type CallContext,
  type Config,
  type Logger,
  notFound,
  type ObjectStorage,
  type Sql,
  type TransactionSql,
} from '@imagegen/platform';
import type { ContentCredentials } from '../credentials/content-credentials.js';
import { processImage, storeImage } from '../images/store-image.js';
import { newSessionId } from '../sessions/store.js';
import {
  ASPECT_RATIOS,
  assetListWhere,
  cleanTags,
  findAsset,
  idArray,
  iso,
  isoOrUndef,
  isUniqueViolation,
  LIMITS,
  LIST_SORTS,
  num,
  numArray,
  Problems,
  REFERENCE_MODES,
  strOrUndef,
  tenantOf,
} from './common.js';
import { type FetchedImage, fetchImage, isHttpUrl, REQUEST_FETCH_BUDGET_MS } from './fetch-image.js';
import { findImages, orderedRefs, type RefImage, toReferenceImage } from './images.js';
import { assetOrders, keysetPage } from './keyset.js';
import type { QuotaGuard } from './quota.js';

export interface SceneRow {
  id: number;
  sceneName: string;
  description: string | null;
  scenePrompt: string | null;
  referenceImageIds: number[];
  defaultReferenceMode: string | null;
  preferredAspectRatio: string | null;
  tags: string[];
  timesUsed: number;
  createdAt: Date;
  updatedAt: Date;
  lastUsedAt: Date | null;
}

export function sceneFromDb(r: Record<string, unknown>): SceneRow {
  return {
    id: num(r.id),
    sceneName: r.scene_name as string,
    description: (r.description as string | null) ?? null,
    scenePrompt: (r.scene_prompt as string | null) ?? null,
    referenceImageIds: numArray(r.reference_image_ids),
    defaultReferenceMode: (r.default_reference_mode as string | null) ?? null,
    preferredAspectRatio: (r.preferred_aspect_ratio as string | null) ?? null,
    tags: (r.tags as string[] | null) ?? [],
    timesUsed: num(r.times_used),
    createdAt: r.created_at as Date,
    updatedAt: r.updated_at as Date,
    lastUsedAt: (r.last_used_at as Date | null) ?? null,
  };
}

export function toScene(row: SceneRow, images: Map<number, RefImage>, storage: ObjectStorage): Scene {
  const refs = orderedRefs(row.referenceImageIds, images);
  return {
    id: row.id,
    sceneName: row.sceneName,
    description: strOrUndef(row.description),
    scenePrompt: strOrUndef(row.scenePrompt),
    referenceImages: refs.map((i) => toReferenceImage(i, storage)),
    imageCount: refs.length,
    defaultReferenceMode: strOrUndef(row.defaultReferenceMode),
    preferredAspectRatio: strOrUndef(row.preferredAspectRatio),
    tags: row.tags,
    timesUsed: row.timesUsed,
    createdAt: iso(row.createdAt),
    updatedAt: iso(row.updatedAt),
    lastUsedAt: isoOrUndef(row.lastUsedAt),
    thumbnailUrl: refs[0] ? storage.publicUrl(refs[0].thumbnailKey) : undefined,
  };
}

export const sceneNotFound = (identifier: string | number): AppError =>
  notFound(`Scene preset with ID ${identifier} not found for this tenant`);
const invalidScene = (details: string[]): AppError => badRequest('Invalid scene preset payload', details);
const duplicateName = (name: string): AppError =>
  badRequest(`Scene preset ${name} already exists. Choose a different name or update the existing scene preset.`);
const foreignReference = (id: number): AppError => badRequest(`Reference image ${id} not found or does not belong to this tenant`);

const SCENES = { table: 'scenes', nameColumn: 'scene_name', fromDb: sceneFromDb, notFound: sceneNotFound };

export async function findScene(
  sql: Sql | TransactionSql,
  tenantId: string,
  identifier: string,
  opts: { forUpdate?: boolean; byName?: boolean } = {},
): Promise<SceneRow> {
  return findAsset(sql, SCENES, tenantId, identifier, opts);
}

interface SceneFields {
  sceneName?: string | null;
  nameField: string;
  description?: string | null;
  scenePrompt?: string | null;
  referenceImageIds?: number[];
  referenceImageUrls?: string[];
  defaultReferenceMode?: string | null;
  preferredAspectRatio?: string | null;
  tags?: string[];
}

function validateFields(f: SceneFields, nameGiven: boolean): void {
  const p = new Problems();
  if (nameGiven) {
    const n = (f.sceneName ?? '').trim();
    if (n.length === 0) p.add(`${f.nameField} cannot be empty`);
    p.maxLength(f.nameField, n, LIMITS.sceneName);
  }
  p.maxLength('description', f.description, LIMITS.sceneDescription);
  p.maxLength('scene_prompt', f.scenePrompt, LIMITS.scenePrompt);
  if (f.referenceImageIds) {
    if (f.referenceImageIds.length > LIMITS.sceneReferences) p.add(`reference_image_ids must have at most ${LIMITS.sceneReferences} items`);
    if (f.referenceImageIds.some((i) => !Number.isSafeInteger(i) || i < 1)) p.add('reference_image_ids must contain positive integers');
  }
  if (f.referenceImageUrls) {
    if (f.referenceImageUrls.length > LIMITS.sceneReferences)
      p.add(`reference_image_urls must have at most ${LIMITS.sceneReferences} items`);
    f.referenceImageUrls.forEach((u, i) => {
      if (!isHttpUrl(u)) p.add(`reference_image_urls[${i}] must be a valid HTTP or HTTPS URL`);
    });
  }
  p.oneOf('default_reference_mode', f.defaultReferenceMode, REFERENCE_MODES);
  p.oneOf('preferred_aspect_ratio', f.preferredAspectRatio, ASPECT_RATIOS);
  p.tags('tags', f.tags);
  p.throwIf(invalidScene);
}

/** Every existing reference must be an image of the tenant ('Reference image <id> not found ...'). */
async function checkReferenceIds(sql: Sql | TransactionSql, tenantId: string, ids: number[]): Promise<number[]> {
  const unique = [...new Set(ids)];
  const found = await findImages(sql, tenantId, unique);
  for (const id of unique) if (!found.has(id)) throw foreignReference(id);
  return unique;
}

const ORDERS = assetOrders('scene_name');

export function sceneHandlers(deps: {
  sql: Sql;
  storage: ObjectStorage;
  config: Config;
  /** Imports keep their bytes; storeImage records what their own Content Credentials say. */
  credentials: ContentCredentials;
  quota: QuotaGuard;
  logger: Logger;
  cursorKey: Buffer;
}) {
  const { sql, storage, quota } = deps;

  async function render(tenantId: string, rows: SceneRow[]): Promise<Scene[]> {
    const images = await findImages(
      sql,
      tenantId,
      rows.flatMap((r) => r.referenceImageIds),
    );
    return rows.map((r) => toScene(r, images, storage));
  }

  /**
   * Fetches and validates EVERY URL before anything is saved (SPEC 8 "Scene URL imports"): each must be an
   * image, the aggregate at most 20 MiB. Then checks the quota for all of them at once.
   */
  async function fetchAll(tenantId: string, urls: string[], call: CallContext): Promise<{ fetched: FetchedImage[]; mimes: string[] }> {
    const fetched: FetchedImage[] = [];
    const mimes: string[] = [];
    let total = 0;
    let thumbs = 0;
    // One budget for all the URLs of the request (each fetch also has its own), below the call deadline.
    const deadline = AbortSignal.timeout(REQUEST_FETCH_BUDGET_MS);
    for (const url of urls) {
      const f = await fetchImage(url, {
        maxBytes: LIMITS.fetchBytes - total,
        signal: deadline,
        allowLoopback: deps.config.allowLoopbackFetch,
        invalidUrl: () => invalidScene([`reference_image_urls must be valid HTTP or HTTPS URLs: ${url}`]),
        logger: call.logger,
      }).catch((err: AppError) => {
        if (/exceeds \d+ bytes/.test(err.message)) {
          throw invalidScene([`reference images fetched from URLs exceed ${LIMITS.fetchBytes} bytes in total`]);
        }
        throw err;
      });
      total += f.data.length;
      const img = await processImage(f.data); // fetchImage's guard checked format and pixels from the header first
      thumbs += img.thumbnail.length;
      mimes.push(img.mimeType);
      fetched.push(f);
    }
    if (fetched.length) await quota.check(tenantId, total + thumbs, call);
    return { fetched, mimes };
  }

  /** Stores fetched images as library reference images (operation scene-reference). No transaction (SPEC 8). */
  async function importAll(tenantId: string, sceneName: string, batch: { fetched: FetchedImage[]; mimes: string[] }, call: CallContext) {
    const ids: number[] = [];
    if (batch.fetched.length === 0) return ids;
    const sessionId = call.principal.sessionId || newSessionId();
    for (const [i, f] of batch.fetched.entries()) {
      const row = await storeImage(
        { sql, storage, config: deps.config, logger: call.logger, credentials: deps.credentials },
        {
          tenantId,
          sessionId,
          data: f.data,
          mimeType: batch.mimes[i],
          prompt: `Reference image for scene ${sceneName}`,
          operation: 'scene-reference',
          isReference: true,
          keyType: call.principal.keyType,
        },
      );
      ids.push(row.id);
    }
    return ids;
  }

  return {
    async listScenes(req: ListScenesRequest, call: CallContext): Promise<ListScenesResponse> {
      const tenantId = tenantOf(call);
      const p = new Problems();
      const limit = req.limit || LIMITS.listDefault;
      if (limit < 1 || limit > LIMITS.listMax) p.add(`limit must be between 1 and ${LIMITS.listMax}`);
      if (req.offset < 0) p.add('offset must be >= 0');
      const sortBy = req.sortBy || 'name';
      p.oneOf('sort_by', sortBy, LIST_SORTS);
      p.maxLength('search', req.search, LIMITS.searchQuery);
      p.throwIf((d) => badRequest('Invalid request payload', d));
      const where = assetListWhere(sql, 'scenes', tenantId, req.search);
      const [{ total }] = await sql`SELECT count(*)::int AS total FROM scenes WHERE ${where}`;
      const page = await keysetPage({
        sql,
        tenantId,
        cursorKey: deps.cursorKey,
        table: 'scenes',
        where,
        order: ORDERS[sortBy],
        sort: `scenes:${sortBy}`,
        limit,
        offset: req.offset,
        cursor: req.cursor,
        offsetField: 'offset',
      });
      const scenes = await render(tenantId, page.rows.map(sceneFromDb));
      return { scenes, total: num(total), limit, offset: req.offset, hasMore: page.hasMore, nextCursor: page.nextCursor };
    },

    async getScene(req: GetAssetRequest, call: CallContext): Promise<Scene> {
      const tenantId = tenantOf(call);
      return (await render(tenantId, [await findScene(sql, tenantId, req.identifier, { byName: req.byName })]))[0];
    },

    async createScene(req: CreateSceneRequest, call: CallContext): Promise<Scene> {
      const tenantId = tenantOf(call);
      validateFields({ ...req, nameField: 'scene_name' }, true);
      const name = req.sceneName.trim();
      const prompt = req.scenePrompt?.trim() ? req.scenePrompt : null;
      if (!prompt && req.referenceImageIds.length === 0 && req.referenceImageUrls.length === 0) {
        throw invalidScene(['At least one of scene_prompt, reference_image_ids or reference_image_urls is required']);
      }
      const existing = await checkReferenceIds(sql, tenantId, req.referenceImageIds);
      if (existing.length + req.referenceImageUrls.length > LIMITS.sceneReferences) {
        throw invalidScene([
          `A scene preset holds at most ${LIMITS.sceneReferences} reference images (existing ids and new URLs combined)`,
        ]);
      }
      const [dup] = await sql`SELECT 1 FROM scenes WHERE tenant_id = ${tenantId} AND scene_name = ${name}`;
      if (dup) throw duplicateName(name);
      const batch = await fetchAll(tenantId, req.referenceImageUrls, call);
      const imported = await importAll(tenantId, name, batch, call);
      const ids = [...existing, ...imported.filter((i) => !existing.includes(i))];
      try {
        const [r] = await sql`
          INSERT INTO scenes (tenant_id, scene_name, description, scene_prompt, reference_image_ids, default_reference_mode,
            preferred_aspect_ratio, tags)
          VALUES (${tenantId}, ${name}, ${req.description ?? null}, ${prompt}, ${idArray(ids)}::bigint[],
            ${req.defaultReferenceMode ?? null}, ${req.preferredAspectRatio ?? null}, ${cleanTags(req.tags)}::text[])
          RETURNING *`;
        return (await render(tenantId, [sceneFromDb(r)]))[0];
      } catch (err) {
        // The imported images stay in the library (no transaction across storage and database, SPEC 8).
        if (isUniqueViolation(err)) throw duplicateName(name);
        throw err;
      }
    },

    async updateScene(req: UpdateSceneRequest, call: CallContext): Promise<Scene> {
      const tenantId = tenantOf(call);
      const present = new Set(req.presentFields);
      const has = (f: string) => present.has(f);
      validateFields(
        {
          sceneName: req.newSceneName ?? null,
          nameField: 'new_scene_name',
          description: req.description,
          scenePrompt: req.scenePrompt,
          referenceImageIds: has('reference_image_ids') ? req.referenceImageIds : undefined,
          referenceImageUrls: has('reference_image_urls') ? req.referenceImageUrls : undefined,
          defaultReferenceMode: req.defaultReferenceMode,
          preferredAspectRatio: req.preferredAspectRatio,
          tags: has('tags') ? req.tags : undefined,
        },
        has('new_scene_name'),
      );
      const cur = await findScene(sql, tenantId, req.identifier);
      const renamed = has('new_scene_name');
      const newName = renamed ? (req.newSceneName ?? '').trim() : cur.sceneName;
      // Kept references are the scene's images that still exist: an id whose image was deleted since (readers skip
      // it) neither counts toward the 20 nor keeps the scene valid when its prompt is cleared.
      const existingRefs = (tx: Sql | TransactionSql, ids: number[]) =>
        findImages(tx, tenantId, ids).then((found) => orderedRefs(ids, found).map((i) => i.id));
      const givenIds = has('reference_image_ids') ? await checkReferenceIds(sql, tenantId, req.referenceImageIds) : undefined;
      const urls = has('reference_image_urls') ? req.referenceImageUrls : [];
      const promptOf = (row: SceneRow) =>
        has('scene_prompt') ? (req.scenePrompt?.trim() ? (req.scenePrompt as string) : null) : row.scenePrompt;
      /** The 20-reference limit and "a prompt or references" rule for the scene as it will be saved. */
      const checkResult = (row: SceneRow, keptIds: number[], newCount: number) => {
        if (keptIds.length + newCount > LIMITS.sceneReferences) {
          throw invalidScene([
            `A scene preset holds at most ${LIMITS.sceneReferences} reference images (existing ids and new URLs combined)`,
          ]);
        }
        if (!promptOf(row)?.trim() && keptIds.length + newCount === 0) {
          throw badRequest('Scene preset must include at least a prompt or reference images');
        }
      };
      // Early answers from the unlocked read, before any URL is fetched; re-checked under the row lock below.
      checkResult(cur, givenIds ?? (await existingRefs(sql, cur.referenceImageIds)), urls.length);
      if (renamed && newName !== cur.sceneName) {
        const [dup] = await sql`SELECT 1 FROM scenes WHERE tenant_id = ${tenantId} AND scene_name = ${newName} AND id <> ${cur.id}`;
        if (dup) throw duplicateName(newName);
      }
      const batch = await fetchAll(tenantId, urls, call);
      const imported = await importAll(tenantId, newName, batch, call);
      const pick = <T>(field: string, given: T | undefined, current: T | null): T | null =>
        has(field) ? (given === undefined ? null : given) : current;
      try {
        const row = await sql.begin(async (tx) => {
          // Read-modify-write under the row lock: fields this request does not set keep the values of the row as
          // it is now (a concurrent PATCH's changes are not overwritten), and the limits hold for the final row.
          const [locked] = await tx`SELECT * FROM scenes WHERE tenant_id = ${tenantId} AND id = ${cur.id} FOR UPDATE`;
          if (!locked) throw sceneNotFound(req.identifier);
          const now = sceneFromDb(locked);
          const keptIds = givenIds ?? (await existingRefs(tx, now.referenceImageIds));
          const ids = [...keptIds, ...imported.filter((i) => !keptIds.includes(i))];
          checkResult(now, keptIds, ids.length - keptIds.length);
          const [r] = await tx`
            UPDATE scenes SET
              scene_name = ${renamed ? newName : now.sceneName},
              description = ${pick('description', req.description, now.description)},
              scene_prompt = ${promptOf(now)},
              reference_image_ids = ${idArray(ids)}::bigint[],
              default_reference_mode = ${pick('default_reference_mode', req.defaultReferenceMode, now.defaultReferenceMode)},
              preferred_aspect_ratio = ${pick('preferred_aspect_ratio', req.preferredAspectRatio, now.preferredAspectRatio)},
              tags = ${has('tags') ? cleanTags(req.tags) : now.tags}::text[],
              updated_at = now()
            WHERE tenant_id = ${tenantId} AND id = ${cur.id}
            RETURNING *`;
          return sceneFromDb(r);
        });
        return (await render(tenantId, [row]))[0];
      } catch (err) {
        if (isUniqueViolation(err)) throw duplicateName(newName);
        throw err;
      }
    },

    async deleteScene(req: GetAssetRequest, call: CallContext): Promise<DeleteSceneResponse> {
      const tenantId = tenantOf(call);
      const row = await findScene(sql, tenantId, req.identifier);
      const images = await findImages(sql, tenantId, row.referenceImageIds);
      // Reference images stay in the library.
      // A concurrent delete of the same scene may win between the look-up and the delete: then 404.
      const gone = await sql`DELETE FROM scenes WHERE tenant_id = ${tenantId} AND id = ${row.id} RETURNING id`;
      if (gone.length === 0) throw sceneNotFound(req.identifier);
      return { deleted: true, sceneId: row.id, sceneName: row.sceneName, imageCount: orderedRefs(row.referenceImageIds, images).length };
    },
  };
}
