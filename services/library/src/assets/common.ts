import {
  ASPECT_RATIOS,
  ASSET_LIST_LIMIT_DEFAULT,
  ASSET_SORTS,
  BASE_PROMPT_MAX,
  BASE_PROMPT_MIN,
  CHARACTER_DESCRIPTION_MAX,
  CHARACTER_NAME_MAX,
  CHARACTER_NEGATIVE_PROMPT_MAX,
  CHARACTER_REFERENCE_IMAGES_MAX,
  CHARACTER_SYSTEM_INSTRUCTION_MAX,
  LIST_LIMIT_DEFAULT,
  LIST_LIMIT_MAX,
  PRODUCT_DESCRIPTION_MAX,
  PRODUCT_NAME_MAX,
  REFERENCE_MODES,
  SCENE_DESCRIPTION_MAX,
  SCENE_NAME_MAX,
  SCENE_PROMPT_MAX,
  SCENE_REFERENCES_MAX,
  SEARCH_PRESET_NAME_MAX,
  SEARCH_QUERY_MAX,
  SESSION_ID_MAX,
  STYLE_PRESET_NAME_MAX,
  STYLE_PRESET_NEGATIVE_PROMPT_MAX,
  STYLE_PRESET_PROMPT_MAX,
  STYLE_PRESET_SYSTEM_INSTRUCTION_MAX,
  TAG_MAX,
  TAGS_MAX,
  UPLOAD_MAX_BYTES,
} from '@imagegen/api-schemas/vocab';
import { type AppError, type CallContext, type ObjectStorage, type Sql, type TransactionSql, unauthorized } from '@imagegen/platform';

/** SPEC 8 "Text and collection limits" and the per-resource limits of SPEC 2, as the API's vocabulary defines them. */
export const LIMITS = {
  characterName: CHARACTER_NAME_MAX,
  characterDescription: CHARACTER_DESCRIPTION_MAX,
  basePromptMin: BASE_PROMPT_MIN,
  basePromptMax: BASE_PROMPT_MAX,
  characterNegativePrompt: CHARACTER_NEGATIVE_PROMPT_MAX,
  characterSystemInstruction: CHARACTER_SYSTEM_INSTRUCTION_MAX,
  characterReferenceImages: CHARACTER_REFERENCE_IMAGES_MAX,
  tags: TAGS_MAX,
  tagLength: TAG_MAX,
  productName: PRODUCT_NAME_MAX,
  productDescription: PRODUCT_DESCRIPTION_MAX,
  stylePresetName: STYLE_PRESET_NAME_MAX,
  stylePresetPrompt: STYLE_PRESET_PROMPT_MAX,
  stylePresetNegativePrompt: STYLE_PRESET_NEGATIVE_PROMPT_MAX,
  stylePresetSystemInstruction: STYLE_PRESET_SYSTEM_INSTRUCTION_MAX,
  sceneName: SCENE_NAME_MAX,
  sceneDescription: SCENE_DESCRIPTION_MAX,
  scenePrompt: SCENE_PROMPT_MAX,
  sceneReferences: SCENE_REFERENCES_MAX,
  searchPresetName: SEARCH_PRESET_NAME_MAX,
  searchQuery: SEARCH_QUERY_MAX,
  sessionId: SESSION_ID_MAX,
  /** Server-side URL fetches: one image, and the aggregate of one scene request (20 MiB). */
  fetchBytes: UPLOAD_MAX_BYTES,
  fetchTimeoutMs: 30_000,
  listDefault: ASSET_LIST_LIMIT_DEFAULT,
  listMax: LIST_LIMIT_MAX,
  productPageSizeDefault: LIST_LIMIT_DEFAULT,
} as const;

/** Aspect ratios accepted anywhere a saved asset carries one (the generate request's set, SPEC 4.1), reference modes, list orders. */
export { ASPECT_RATIOS, ASSET_SORTS as LIST_SORTS, REFERENCE_MODES };

export function tenantOf(call: CallContext): string {
  const t = call.principal.tenantId;
  if (!t) throw unauthorized();
  return t;
}

export const num = (v: unknown): number => (typeof v === 'number' ? v : Number(v));
export const iso = (d: unknown): string => (d instanceof Date ? d : new Date(String(d))).toISOString();
export const isoOrUndef = (d: unknown): string | undefined => (d === null || d === undefined ? undefined : iso(d));
export const strOrUndef = (v: unknown): string | undefined => (v === null || v === undefined ? undefined : String(v));
export const numArray = (v: unknown): number[] => (Array.isArray(v) ? v.map(num) : []);

/** A numeric identifier addresses the id; anything else is an exact name. */
export function parseIdentifier(identifier: string): { id?: number; name: string } {
  const s = String(identifier ?? '');
  if (/^\d{1,15}$/.test(s)) return { id: Number(s), name: s };
  return { name: s };
}

/** A table of named assets (characters, products, scenes, style presets) of the library schema. */
export interface AssetTable<T> {
  table: string;
  nameColumn: string;
  fromDb: (r: Record<string, unknown>) => T;
  notFound: (identifier: string) => AppError;
}

/**
 * Resolves an asset `:identifier` (SPEC 1, convention 7: the numeric id or the URL-encoded name, which the
 * route has decoded) of the tenant: a numeric identifier is looked up as the id first and then as a name,
 * anything else as an exact name (`byName`: only as a name). `forUpdate` locks the row.
 */
export async function findAsset<T>(
  sql: Sql | TransactionSql,
  assets: AssetTable<T>,
  tenantId: string,
  identifier: string,
  opts: { forUpdate?: boolean; byName?: boolean } = {},
): Promise<T> {
  const { id, name } = opts.byName ? { id: undefined, name: identifier } : parseIdentifier(identifier);
  const table = sql(assets.table);
  const lock = opts.forUpdate ? sql`FOR UPDATE` : sql``;
  if (id !== undefined) {
    const [r] = await sql`SELECT * FROM ${table} WHERE tenant_id = ${tenantId} AND id = ${id} ${lock}`;
    if (r) return assets.fromDb(r);
  }
  const [r] = await sql`SELECT * FROM ${table} WHERE tenant_id = ${tenantId} AND ${sql(assets.nameColumn)} = ${name} ${lock}`;
  if (!r) throw assets.notFound(identifier);
  return assets.fromDb(r);
}

/** Postgres bigint[] literal for a list of integer ids. */
export const idArray = (ids: number[]): string => `{${ids.map((i) => Math.trunc(i)).join(',')}}`;

/** Characters with a special meaning in LIKE patterns are matched literally. */
export const likePattern = (s: string): string => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/**
 * Whether search_trgm_keys (migration 190) gives `text` any key: it needs three letters or digits in a row. Without
 * one a key index would match every row, so the search tests the rows themselves instead.
 */
export const hasSearchKeys = (text: string): boolean => /[a-z0-9]{3}/i.test(text);

/**
 * What each asset list's `search` matches (SPEC 4.2, 4.4, 4.5): `fields`, each tested with ILIKE '%term%'; and `keys`,
 * the expression of the list's key index (migrations 260, 270 and 330) over the same fields, written exactly as the index
 * is built, or the planner cannot use it.
 */
const ASSET_SEARCH = {
  characters: {
    fields: ['character_name', "coalesce(description, '')", "array_to_string(tags, ' ')"],
    keys: 'asset_search_keys(tenant_id, ARRAY[character_name, description] || tags)',
  },
  scenes: {
    fields: ['scene_name', "coalesce(description, '')", "coalesce(scene_prompt, '')", "array_to_string(tags, ' ')"],
    keys: 'asset_search_keys(tenant_id, ARRAY[scene_name, description, scene_prompt] || tags)',
  },
  products: {
    fields: ['product_name', "coalesce(product_description, '')", 'tags'],
    keys: 'asset_search_keys(tenant_id, ARRAY[product_name, product_description, tags])',
  },
  // extension (the SPEC shows no list parameters for style presets): migration 330
  style_presets: {
    fields: ['name', "coalesce(prompt, '')"],
    keys: 'asset_search_keys(tenant_id, ARRAY[name, prompt])',
  },
} as const;

/**
 * The WHERE of an asset list: the tenant, and with a search the assets one of whose fields contains it (ILIKE). When
 * the term has a run of three letters or digits, the candidates come from the list's key index first (every asset
 * that matches holds the term's keys; the ILIKEs stay the exact test); without one the term has no keys, and the
 * ILIKEs test every asset of the tenant.
 */
export function assetListWhere(sql: Sql, list: keyof typeof ASSET_SEARCH, tenantId: string, search?: string) {
  const term = search?.trim() ?? '';
  if (!term) return sql`tenant_id = ${tenantId}`;
  const pattern = likePattern(term);
  const { fields, keys } = ASSET_SEARCH[list];
  const matches = fields.map((f) => sql`${sql.unsafe(f)} ILIKE ${pattern}`).reduce((a, b) => sql`${a} OR ${b}`);
  const candidates = hasSearchKeys(term) ? sql`AND ${sql.unsafe(keys)} @> search_trgm_keys(${tenantId}, ${term})` : sql``;
  return sql`tenant_id = ${tenantId} ${candidates} AND (${matches})`;
}

export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint_name?: string } | null;
  return e?.code === '23505' && (!constraint || e.constraint_name === constraint);
}

/** Collects validation problems ("description must be at most 500 characters") for one error. */
export class Problems {
  readonly list: string[] = [];
  add(msg: string): void {
    if (!this.list.includes(msg)) this.list.push(msg);
  }
  maxLength(field: string, v: string | null | undefined, max: number): void {
    if (typeof v === 'string' && v.length > max) this.add(`${field} must be at most ${max} characters`);
  }
  oneOf(field: string, v: string | null | undefined, allowed: readonly string[]): void {
    if (typeof v === 'string' && !allowed.includes(v)) this.add(`${field} must be one of: ${allowed.join(', ')}`);
  }
  tags(field: string, tags: string[] | undefined): void {
    if (!tags) return;
    if (tags.length > LIMITS.tags) this.add(`${field} must have at most ${LIMITS.tags} items`);
    tags.forEach((t, i) => {
      if (t.trim().length === 0) this.add(`${field}[${i}] cannot be empty`);
      if (t.length > LIMITS.tagLength) this.add(`${field}[${i}] must be at most ${LIMITS.tagLength} characters`);
    });
  }
  throwIf(make: (details: string[]) => AppError): void {
    if (this.list.length) throw make(this.list);
  }
}

/** Normalizes a list of tags: trimmed, empty ones dropped, duplicates removed (first kept). */
export function cleanTags(tags: string[]): string[] {
  const out: string[] = [];
  for (const t of tags) {
    const v = t.trim();
    if (v && !out.includes(v)) out.push(v);
  }
  return out;
}

/** Clears a field when it is listed as present without a value (PATCH null). */
export function patchValue<T>(present: Set<string>, field: string, value: T | undefined): { set: boolean; value: T | null } {
  if (!present.has(field)) return { set: false, value: null };
  return { set: true, value: value === undefined ? null : value };
}

export interface AssetsDeps {
  storage: ObjectStorage;
}
