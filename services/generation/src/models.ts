/**
 * The model catalogue (SPEC 1 "Models") and the geometry rules shared by validation, the provider
 * adapters and edits: aspect ratios, provA resolution tiers, provB sizes. The ids, ratios, tiers and limits
 * themselves are the API's vocabulary (@imagegen/api-schemas/vocab), which the REST and MCP schemas use too.
 */
import {
  ALIAS_RATIOS,
  type AspectRatioAlias,
  MODEL_IDS,
  type ModelId,
  PROVB_SIZE_LIMITS,
  type Provider,
  RATIOS,
  type Ratio,
  type ResolutionTier,
} from '@imagegen/api-schemas/vocab';

export type { Provider };
export { MODEL_IDS, PROVB_SIZE_LIMITS };

export interface ModelInfo {
  id: ModelId;
  provider: Provider;
  /** provA: resolution tiers other than 1k (flash and pro). */
  higherTiers: boolean;
  /** provA: web search grounding (flash and pro). */
  search: boolean;
  /** provB: quality xhigh/max and transparent backgrounds (the 2.5 models). */
  extended: boolean;
  /** Upstream model name used when no PROVA_MODEL_MAP / PROVB_MODEL_MAP entry exists. */
  upstream: string;
}

/** What each model of the vocabulary can do (every id of MODEL_IDS, and no other: the type checks both). */
const CAPABILITIES: Record<ModelId, Omit<ModelInfo, 'id'>> = {
  'provA-flash-lite-image': { provider: 'provA', higherTiers: false, search: false, extended: false, upstream: 'flash-lite-image' },
  'provA-flash-image': { provider: 'provA', higherTiers: true, search: true, extended: false, upstream: 'flash-image' },
  'provA-pro-image': { provider: 'provA', higherTiers: true, search: true, extended: false, upstream: 'pro-image' },
  'provB-image-2': { provider: 'provB', higherTiers: false, search: false, extended: false, upstream: 'image-2' },
  'provB-image-2.5-flare': { provider: 'provB', higherTiers: false, search: false, extended: true, upstream: 'image-2.5-flare' },
  'provB-image-2.5-sunburst': { provider: 'provB', higherTiers: false, search: false, extended: true, upstream: 'image-2.5-sunburst' },
};

/** The catalogue by model id, in MODEL_IDS order. */
export const MODELS: Readonly<Record<string, ModelInfo>> = Object.fromEntries(MODEL_IDS.map((id) => [id, { id, ...CAPABILITIES[id] }]));

/** Upstream model name: the configured map wins over the built-in default. */
export function upstreamModel(model: ModelInfo, maps: { provA?: Record<string, string>; provB?: Record<string, string> }): string {
  return maps[model.provider]?.[model.id] ?? model.upstream;
}

/** The ratio an alias (square, portrait, landscape; trimmed, lower-case) stands for, else undefined. */
export function aliasedRatio(t: string): string | undefined {
  // Own keys only: 'constructor' or 'toString' must not find Object.prototype's functions.
  return Object.hasOwn(ALIAS_RATIOS, t) ? ALIAS_RATIOS[t as AspectRatioAlias] : undefined;
}

/** The canonical ratio for a request value (alias or ratio), or undefined when not supported. */
export function normalizeRatio(v: string): string | undefined {
  const t = v.trim().toLowerCase();
  return aliasedRatio(t) ?? ((RATIOS as readonly string[]).includes(t) ? t : undefined);
}

const ratioValue = (r: string) => {
  const [w, h] = r.split(':').map(Number);
  return w / h;
};

/** The supported ratio closest to a picture's shape (edits keep the source shape). */
export function closestRatio(width: number, height: number): string {
  const target = Math.log(width / height);
  let best: string = RATIOS[0];
  let bestDist = Number.POSITIVE_INFINITY;
  for (const r of RATIOS) {
    const d = Math.abs(Math.log(ratioValue(r)) - target);
    if (d < bestDist) {
      best = r;
      bestDist = d;
    }
  }
  return best;
}

/** provA imageSize values sent upstream for our tiers. */
export const PROVA_IMAGE_SIZE: Readonly<Record<string, string>> = {
  '0.5k': '512',
  '1k': '1K',
  '2k': '2K',
  '4k': '4K',
} satisfies Record<ResolutionTier, string>;

/** provB sizes used when the request gives a ratio (or nothing) instead of a size. */
export const PROVB_SIZE_FOR_RATIO: Readonly<Record<string, string>> = {
  '1:1': '1024x1024',
  '2:3': '1024x1536',
  '3:2': '1536x1024',
  '3:4': '864x1152',
  '4:3': '1152x864',
  '4:5': '896x1120',
  '5:4': '1120x896',
  '9:16': '720x1280',
  '16:9': '1280x720',
  '21:9': '1344x576',
} satisfies Record<Ratio, string>;

/** 655360 -> '655,360' (as the SPEC writes pixel counts). */
const grouped = (n: number) => n.toLocaleString('en-US');

/** Problems of a provB size value (empty when valid); `auto` is valid. */
export function sizeProblems(size: string): string[] {
  if (size === 'auto') return [];
  const m = /^(\d{1,5})x(\d{1,5})$/.exec(size);
  if (!m) return ['size must be auto or WIDTHxHEIGHT (e.g. 1024x1536)'];
  const w = Number(m[1]);
  const h = Number(m[2]);
  const out: string[] = [];
  const L = PROVB_SIZE_LIMITS;
  if (w === 0 || h === 0) return ['size width and height must be positive'];
  if (w % L.multiple !== 0 || h % L.multiple !== 0) out.push(`size width and height must be multiples of ${L.multiple}`);
  if (Math.max(w, h) > L.maxEdge) out.push(`size longest edge must be at most ${L.maxEdge} pixels`);
  if (Math.max(w, h) / Math.min(w, h) > L.maxRatio) out.push(`size long:short ratio must be at most ${L.maxRatio}:1`);
  const px = w * h;
  if (px < L.minPixels || px > L.maxPixels)
    out.push(`size must have between ${grouped(L.minPixels)} and ${grouped(L.maxPixels)} pixels in total`);
  return out;
}

export function parseSize(size: string): { width: number; height: number } | undefined {
  const m = /^(\d+)x(\d+)$/.exec(size);
  return m ? { width: Number(m[1]), height: Number(m[2]) } : undefined;
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** The ratio recorded for a provB WxH size: a supported ratio when it matches exactly, else W:H reduced. */
export function ratioOfSize(width: number, height: number): string {
  const exact = RATIOS.find((r) => Math.abs(ratioValue(r) - width / height) < 0.01);
  if (exact) return exact;
  const g = gcd(width, height);
  return `${width / g}:${height / g}`;
}

/** Resolution tier of a picture by its longest edge (provB results and uploads). */
export function tierOf(width: number, height: number): string {
  const edge = Math.max(width, height);
  if (edge <= 800) return '0.5k';
  if (edge <= 1600) return '1k';
  if (edge <= 3200) return '2k';
  return '4k';
}
