import type {
  Character,
  CreateCharacterRequest,
  DeleteAssetResponse,
  GetAssetRequest,
  ListCharactersRequest,
  ListCharactersResponse,
  UpdateCharacterRequest,
} from '@imagegen/contracts/library/v1/assets';
import {
  type AppError,
  badRequest,
  type CallContext,
  conflict,
  invalidPayload,
  notFound,
  type ObjectStorage,
  type Sql,
  type TransactionSql,
} from '@imagegen/platform';
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
  strOrUndef,
  tenantOf,
} from './common.js';
import { findImages, invalidImageIds, orderedRefs, type RefImage, toReferenceImage } from './images.js';
import { assetOrders, keysetPage } from './keyset.js';

export interface CharacterRow {
  id: number;
  characterName: string;
  description: string | null;
  basePrompt: string;
  negativePrompt: string | null;
  systemInstruction: string | null;
  preferredAspectRatio: string | null;
  referenceImageIds: number[];
  tags: string[];
  timesUsed: number;
  createdAt: Date;
  updatedAt: Date;
  lastUsedAt: Date | null;
}

export function characterFromDb(r: Record<string, unknown>): CharacterRow {
  return {
    id: num(r.id),
    characterName: r.character_name as string,
    description: (r.description as string | null) ?? null,
    basePrompt: r.base_prompt as string,
    negativePrompt: (r.negative_prompt as string | null) ?? null,
    systemInstruction: (r.system_instruction as string | null) ?? null,
    preferredAspectRatio: (r.preferred_aspect_ratio as string | null) ?? null,
    referenceImageIds: numArray(r.reference_image_ids),
    tags: (r.tags as string[] | null) ?? [],
    timesUsed: num(r.times_used),
    createdAt: r.created_at as Date,
    updatedAt: r.updated_at as Date,
    lastUsedAt: (r.last_used_at as Date | null) ?? null,
  };
}

export function toCharacter(row: CharacterRow, images: Map<number, RefImage>, storage: ObjectStorage): Character {
  const refs = orderedRefs(row.referenceImageIds, images);
  return {
    id: row.id,
    characterName: row.characterName,
    description: strOrUndef(row.description),
    basePrompt: row.basePrompt,
    negativePrompt: strOrUndef(row.negativePrompt),
    systemInstruction: strOrUndef(row.systemInstruction),
    referenceImages: refs.map((i) => toReferenceImage(i, storage)),
    referenceImageCount: refs.length,
    preferredAspectRatio: strOrUndef(row.preferredAspectRatio),
    tags: row.tags,
    timesUsed: row.timesUsed,
    createdAt: iso(row.createdAt),
    lastUsedAt: isoOrUndef(row.lastUsedAt),
    updatedAt: iso(row.updatedAt),
    thumbnailUrl: refs[0] ? storage.publicUrl(refs[0].thumbnailKey) : undefined,
    referenceImageIds: refs.map((i) => i.id),
  };
}

export const characterNotFound = (): AppError => notFound('Character not found');
const duplicateName = (name: string): AppError =>
  conflict(`Character ${name} already exists for this tenant. Use a different name or update the existing character.`);

const CHARACTERS = {
  table: 'characters',
  nameColumn: 'character_name',
  fromDb: characterFromDb,
  notFound: characterNotFound,
};

/** Looks a character up by id or exact name (a numeric identifier falls back to a name lookup). */
export async function findCharacter(
  sql: Sql | TransactionSql,
  tenantId: string,
  identifier: string,
  forUpdate = false,
): Promise<CharacterRow> {
  return findAsset(sql, CHARACTERS, tenantId, identifier, { forUpdate });
}

function validateBasePrompt(v: string | undefined | null): string {
  const s = typeof v === 'string' ? v.trim() : '';
  if (s.length < LIMITS.basePromptMin || s.length > LIMITS.basePromptMax) {
    throw badRequest(`Base prompt must be between ${LIMITS.basePromptMin} and ${LIMITS.basePromptMax} characters`, {
      field: 'base_prompt',
      length: s.length,
      min: LIMITS.basePromptMin,
      max: LIMITS.basePromptMax,
    });
  }
  return s;
}

interface CharacterFields {
  characterName?: string | null;
  description?: string | null;
  negativePrompt?: string | null;
  systemInstruction?: string | null;
  preferredAspectRatio?: string | null;
  referenceImageIds?: number[];
  tags?: string[];
}

function validateFields(f: CharacterFields, nameGiven: boolean): void {
  const p = new Problems();
  if (nameGiven) {
    const n = (f.characterName ?? '').trim();
    if (n.length === 0) p.add('character_name cannot be empty');
    p.maxLength('character_name', n, LIMITS.characterName);
  }
  p.maxLength('description', f.description, LIMITS.characterDescription);
  p.maxLength('negative_prompt', f.negativePrompt, LIMITS.characterNegativePrompt);
  p.maxLength('system_instruction', f.systemInstruction, LIMITS.characterSystemInstruction);
  p.oneOf('preferred_aspect_ratio', f.preferredAspectRatio, ASPECT_RATIOS);
  if (f.referenceImageIds) {
    if (f.referenceImageIds.length > LIMITS.characterReferenceImages) {
      p.add(`reference_image_ids must have at most ${LIMITS.characterReferenceImages} items`);
    }
    // Zero or negative ids are reported as invalid ids (SPEC 7, details.invalid_ids) by checkReferenceIds.
    if (f.referenceImageIds.some((i) => !Number.isSafeInteger(i))) p.add('reference_image_ids must contain integers');
  }
  p.tags('tags', f.tags);
  p.throwIf(invalidPayload);
}

async function checkReferenceIds(sql: Sql | TransactionSql, tenantId: string, ids: number[]): Promise<number[]> {
  const unique = [...new Set(ids)];
  const bad = await invalidImageIds(sql, tenantId, unique);
  if (bad.length) throw badRequest('One or more reference image IDs are invalid', { invalid_ids: bad });
  return unique;
}

async function render(sql: Sql | TransactionSql, tenantId: string, rows: CharacterRow[], storage: ObjectStorage): Promise<Character[]> {
  const images = await findImages(
    sql,
    tenantId,
    rows.flatMap((r) => r.referenceImageIds),
  );
  return rows.map((r) => toCharacter(r, images, storage));
}

const ORDERS = assetOrders('character_name');

export function characterHandlers(deps: { sql: Sql; storage: ObjectStorage; cursorKey: Buffer }) {
  const { sql, storage, cursorKey } = deps;
  return {
    async listCharacters(req: ListCharactersRequest, call: CallContext): Promise<ListCharactersResponse> {
      const tenantId = tenantOf(call);
      const p = new Problems();
      const limit = req.limit || LIMITS.listDefault;
      if (limit < 1 || limit > LIMITS.listMax) p.add(`limit must be between 1 and ${LIMITS.listMax}`);
      if (req.offset < 0) p.add('offset must be >= 0');
      const sortBy = req.sortBy || 'name';
      p.oneOf('sort_by', sortBy, LIST_SORTS);
      p.maxLength('search', req.search, LIMITS.searchQuery);
      p.throwIf(invalidPayload);
      const where = assetListWhere(sql, 'characters', tenantId, req.search);
      const [{ total }] = await sql`SELECT count(*)::int AS total FROM characters WHERE ${where}`;
      const page = await keysetPage({
        sql,
        tenantId,
        cursorKey,
        table: 'characters',
        where,
        order: ORDERS[sortBy],
        sort: `characters:${sortBy}`,
        limit,
        offset: req.offset,
        cursor: req.cursor,
        offsetField: 'offset',
      });
      const characters = await render(sql, tenantId, page.rows.map(characterFromDb), storage);
      return { characters, total: num(total), limit, offset: req.offset, hasMore: page.hasMore, nextCursor: page.nextCursor };
    },

    async getCharacter(req: GetAssetRequest, call: CallContext): Promise<Character> {
      const tenantId = tenantOf(call);
      const row = await findCharacter(sql, tenantId, req.identifier);
      return (await render(sql, tenantId, [row], storage))[0];
    },

    async createCharacter(req: CreateCharacterRequest, call: CallContext): Promise<Character> {
      const tenantId = tenantOf(call);
      const basePrompt = validateBasePrompt(req.basePrompt);
      validateFields(req, true);
      const name = req.characterName.trim();
      const refIds = await checkReferenceIds(sql, tenantId, req.referenceImageIds);
      try {
        const [r] = await sql`
          INSERT INTO characters (tenant_id, character_name, description, base_prompt, negative_prompt, system_instruction,
            preferred_aspect_ratio, reference_image_ids, tags)
          VALUES (${tenantId}, ${name}, ${req.description ?? null}, ${basePrompt}, ${req.negativePrompt ?? null},
            ${req.systemInstruction ?? null}, ${req.preferredAspectRatio ?? null}, ${idArray(refIds)}::bigint[],
            ${cleanTags(req.tags)}::text[])
          RETURNING *`;
        return (await render(sql, tenantId, [characterFromDb(r)], storage))[0];
      } catch (err) {
        if (isUniqueViolation(err)) throw duplicateName(name);
        throw err;
      }
    },

    async updateCharacter(req: UpdateCharacterRequest, call: CallContext): Promise<Character> {
      const tenantId = tenantOf(call);
      const present = new Set(req.presentFields);
      const has = (f: string) => present.has(f);
      const basePrompt = has('base_prompt') ? validateBasePrompt(req.basePrompt) : undefined;
      validateFields(
        {
          characterName: req.characterName ?? null,
          description: req.description,
          negativePrompt: req.negativePrompt,
          systemInstruction: req.systemInstruction,
          preferredAspectRatio: req.preferredAspectRatio,
          referenceImageIds: has('reference_image_ids') ? req.referenceImageIds : undefined,
          tags: has('tags') ? req.tags : undefined,
        },
        has('character_name'),
      );
      const name = has('character_name') ? (req.characterName ?? '').trim() : undefined;
      try {
        const row = await sql.begin(async (tx) => {
          const cur = await findCharacter(tx, tenantId, req.identifier, true);
          const refIds = has('reference_image_ids') ? await checkReferenceIds(tx, tenantId, req.referenceImageIds) : cur.referenceImageIds;
          const pick = <T>(field: string, given: T | undefined, current: T | null): T | null =>
            has(field) ? (given === undefined ? null : given) : current;
          const [r] = await tx`
            UPDATE characters SET
              character_name = ${name ?? cur.characterName},
              base_prompt = ${basePrompt ?? cur.basePrompt},
              description = ${pick('description', req.description, cur.description)},
              negative_prompt = ${pick('negative_prompt', req.negativePrompt, cur.negativePrompt)},
              system_instruction = ${pick('system_instruction', req.systemInstruction, cur.systemInstruction)},
              preferred_aspect_ratio = ${pick('preferred_aspect_ratio', req.preferredAspectRatio, cur.preferredAspectRatio)},
              reference_image_ids = ${idArray(refIds)}::bigint[],
              tags = ${has('tags') ? cleanTags(req.tags) : cur.tags}::text[],
              updated_at = now()
            WHERE tenant_id = ${tenantId} AND id = ${cur.id}
            RETURNING *`;
          return characterFromDb(r);
        });
        return (await render(sql, tenantId, [row], storage))[0];
      } catch (err) {
        if (isUniqueViolation(err)) throw duplicateName(name ?? '');
        throw err;
      }
    },

    async deleteCharacter(req: GetAssetRequest, call: CallContext): Promise<DeleteAssetResponse> {
      const tenantId = tenantOf(call);
      const row = await findCharacter(sql, tenantId, req.identifier);
      // Generated images keep their character_id: images.character_id has no foreign key.
      // A concurrent delete of the same character may win between the look-up and the delete: then 404.
      const gone = await sql`DELETE FROM characters WHERE tenant_id = ${tenantId} AND id = ${row.id} RETURNING id`;
      if (gone.length === 0) throw characterNotFound();
      return { deleted: true };
    },
  };
}
