import type {
  CreateStylePresetRequest,
  DeleteAssetResponse,
  GetAssetRequest,
  ListStylePresetsRequest,
  ListStylePresetsResponse,
  StylePreset,
  UpdateStylePresetRequest,
} from '@imagegen/contracts/library/v1/assets';
import {
  type AppError,
  badRequest,
  type CallContext,
  conflict,
  invalidPayload,
  notFound,
  type Sql,
  type TransactionSql,
} from '@imagegen/platform';
import { ASPECT_RATIOS, assetListWhere, findAsset, iso, isUniqueViolation, LIMITS, num, Problems, strOrUndef, tenantOf } from './common.js';
import { assetOrders, keysetPage } from './keyset.js';

export interface StylePresetRow {
  id: number;
  name: string;
  prompt: string | null;
  negativePrompt: string | null;
  systemInstruction: string | null;
  aspectRatio: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export function stylePresetFromDb(r: Record<string, unknown>): StylePresetRow {
  return {
    id: num(r.id),
    name: r.name as string,
    prompt: (r.prompt as string | null) ?? null,
    negativePrompt: (r.negative_prompt as string | null) ?? null,
    systemInstruction: (r.system_instruction as string | null) ?? null,
    aspectRatio: (r.aspect_ratio as string | null) ?? null,
    createdAt: r.created_at as Date,
    updatedAt: r.updated_at as Date,
  };
}

export function toStylePreset(row: StylePresetRow): StylePreset {
  return {
    id: row.id,
    name: row.name,
    prompt: strOrUndef(row.prompt),
    negativePrompt: strOrUndef(row.negativePrompt),
    systemInstruction: strOrUndef(row.systemInstruction),
    aspectRatio: strOrUndef(row.aspectRatio),
    createdAt: iso(row.createdAt),
    updatedAt: iso(row.updatedAt),
  };
}

export const stylePresetNotFound = (): AppError => notFound('Style preset not found');
const duplicateName = (name: string): AppError => conflict(`Style preset with name ${name} already exists`);

const STYLE_PRESETS = {
  table: 'style_presets',
  nameColumn: 'name',
  fromDb: stylePresetFromDb,
  notFound: stylePresetNotFound,
};

/** By id, or by exact name (style_preset_name of the generate request). */
export async function findStylePreset(
  sql: Sql | TransactionSql,
  tenantId: string,
  identifier: string,
  opts: { forUpdate?: boolean; byName?: boolean } = {},
): Promise<StylePresetRow> {
  return findAsset(sql, STYLE_PRESETS, tenantId, identifier, opts);
}

function validateName(v: string | null | undefined): string {
  const s = typeof v === 'string' ? v.trim() : '';
  if (s.length < 1 || s.length > LIMITS.stylePresetName)
    throw badRequest(`Preset name must be between 1 and ${LIMITS.stylePresetName} characters`);
  return s;
}

function validateFields(f: {
  prompt?: string | null;
  negativePrompt?: string | null;
  systemInstruction?: string | null;
  aspectRatio?: string | null;
}) {
  const p = new Problems();
  p.maxLength('prompt', f.prompt, LIMITS.stylePresetPrompt);
  p.maxLength('negative_prompt', f.negativePrompt, LIMITS.stylePresetNegativePrompt);
  p.maxLength('system_instruction', f.systemInstruction, LIMITS.stylePresetSystemInstruction);
  p.oneOf('aspect_ratio', f.aspectRatio, ASPECT_RATIOS);
  p.throwIf(invalidPayload);
}

const NAME_ORDER = assetOrders('name').name;

export function stylePresetHandlers(deps: { sql: Sql; cursorKey: Buffer }) {
  const { sql, cursorKey } = deps;
  return {
    async listStylePresets(req: ListStylePresetsRequest, call: CallContext): Promise<ListStylePresetsResponse> {
      const tenantId = tenantOf(call);
      const limit = req.limit || LIMITS.listDefault;
      const p = new Problems();
      if (limit < 1 || limit > LIMITS.listMax) p.add(`limit must be between 1 and ${LIMITS.listMax}`);
      if (req.offset < 0) p.add('offset must be >= 0');
      p.maxLength('search', req.search, LIMITS.searchQuery);
      p.throwIf(invalidPayload);
      const where = assetListWhere(sql, 'style_presets', tenantId, req.search);
      const [{ total }] = await sql`SELECT count(*)::int AS total FROM style_presets WHERE ${where}`;
      const page = await keysetPage({
        sql,
        tenantId,
        cursorKey,
        table: 'style_presets',
        where,
        order: NAME_ORDER,
        sort: 'style_presets:name',
        limit,
        offset: req.offset,
        cursor: req.cursor,
        offsetField: 'offset',
      });
      return {
        presets: page.rows.map((r) => toStylePreset(stylePresetFromDb(r))),
        total: num(total),
        limit,
        offset: req.offset,
        nextCursor: page.nextCursor,
      };
    },

    async getStylePreset(req: GetAssetRequest, call: CallContext): Promise<StylePreset> {
      return toStylePreset(await findStylePreset(sql, tenantOf(call), req.identifier));
    },

    async createStylePreset(req: CreateStylePresetRequest, call: CallContext): Promise<StylePreset> {
      const tenantId = tenantOf(call);
      const name = validateName(req.name);
      validateFields(req);
      try {
        const [r] = await sql`
          INSERT INTO style_presets (tenant_id, name, prompt, negative_prompt, system_instruction, aspect_ratio)
          VALUES (${tenantId}, ${name}, ${req.prompt ?? null}, ${req.negativePrompt ?? null}, ${req.systemInstruction ?? null},
            ${req.aspectRatio ?? null})
          RETURNING *`;
        return toStylePreset(stylePresetFromDb(r));
      } catch (err) {
        if (isUniqueViolation(err)) throw duplicateName(name);
        throw err;
      }
    },

    async updateStylePreset(req: UpdateStylePresetRequest, call: CallContext): Promise<StylePreset> {
      const tenantId = tenantOf(call);
      const present = new Set(req.presentFields);
      const has = (f: string) => present.has(f);
      const newName = has('new_name') ? validateName(req.newName) : undefined;
      validateFields(req);
      try {
        const row = await sql.begin(async (tx) => {
          const cur = await findStylePreset(tx, tenantId, req.identifier, { forUpdate: true });
          const pick = (field: string, given: string | undefined, current: string | null): string | null =>
            has(field) ? (given ?? null) : current;
          // updated_at always moves forward, even within the same clock tick as created_at.
          const [r] = await tx`
            UPDATE style_presets SET
              name = ${newName ?? cur.name},
              prompt = ${pick('prompt', req.prompt, cur.prompt)},
              negative_prompt = ${pick('negative_prompt', req.negativePrompt, cur.negativePrompt)},
              system_instruction = ${pick('system_instruction', req.systemInstruction, cur.systemInstruction)},
              aspect_ratio = ${pick('aspect_ratio', req.aspectRatio, cur.aspectRatio)},
              updated_at = greatest(clock_timestamp(), updated_at + interval '1 millisecond')
            WHERE tenant_id = ${tenantId} AND id = ${cur.id}
            RETURNING *`;
          return stylePresetFromDb(r);
        });
        return toStylePreset(row);
      } catch (err) {
        if (isUniqueViolation(err)) throw duplicateName(newName ?? '');
        throw err;
      }
    },

    async deleteStylePreset(req: GetAssetRequest, call: CallContext): Promise<DeleteAssetResponse> {
      const tenantId = tenantOf(call);
      const row = await findStylePreset(sql, tenantId, req.identifier);
      // A concurrent delete of the same preset may win between the look-up and the delete: then 404.
      const gone = await sql`DELETE FROM style_presets WHERE tenant_id = ${tenantId} AND id = ${row.id} RETURNING id`;
      if (gone.length === 0) throw stylePresetNotFound();
      return { deleted: true };
    },
  };
}
