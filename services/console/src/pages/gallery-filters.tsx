/**
 * The gallery's filters (SPEC 4.1): their names as URL query values, their conversion to the typed query of
 * GET /api/images and to a saved search's filters (SPEC 4.6), and the filter form.
 */
import { useEffect, useState } from 'preact/hooks';
import { MODEL_IDS, RATIOS } from '../../../../libs/api-schemas/src/vocab';
import { api } from '../api';
import type { SearchPreset } from '../components/api-types';
import { Button } from '../components/ui';

/** The filters a saved search keeps (SPEC 4.6's filters keys; its sortBy has no place in a newest-first gallery). */
export const PRESET_KEYS = [
  'search',
  'searchMode',
  'dateFrom',
  'dateTo',
  'aspectRatio',
  'operationType',
  'minSize',
  'maxSize',
  'sessionId',
  'hasNegativePrompt',
] as const;

/** The filters of GET /api/images (SPEC 4.1), as URL query names (the API's own names): a saved search's and more. */
export const FILTERS = [...PRESET_KEYS, 'modelId', 'resolutionTier', 'stylePresetId', 'productReferenceId', 'isReference'] as const;
export type FilterName = (typeof FILTERS)[number];
export type Filters = Partial<Record<FilterName, string>>;

/** Each filter's label in the form (and in the note of what a saved search does not keep). */
export const LABELS: Record<FilterName, string> = {
  search: 'Search prompts',
  searchMode: 'Search mode',
  dateFrom: 'From date',
  dateTo: 'To date',
  aspectRatio: 'Aspect ratio',
  operationType: 'Operation',
  minSize: 'Min size (bytes)',
  maxSize: 'Max size (bytes)',
  sessionId: 'Session',
  hasNegativePrompt: 'With a negative prompt only',
  modelId: 'Model',
  resolutionTier: 'Resolution tier',
  stylePresetId: 'Style preset',
  productReferenceId: 'Product',
  isReference: 'Reference images only',
};

type PresetFilters = SearchPreset['filters'];
const NUMERIC = /^\d+$/;
const num = (v?: string) => (v && NUMERIC.test(v) ? Number(v) : undefined);

/** The gallery's filters as a saved search's filters (numbers and booleans as JSON; what it cannot keep left out). */
export function presetFiltersOf(f: Filters): PresetFilters {
  const out: Record<string, string | number | boolean> = {};
  for (const k of PRESET_KEYS) {
    const v = f[k];
    if (!v) continue;
    if (k === 'hasNegativePrompt') out[k] = v === 'true';
    else out[k] = (k === 'minSize' || k === 'maxSize') && NUMERIC.test(v) ? Number(v) : v;
  }
  return out as PresetFilters;
}

/** A saved search's filters as the gallery's (URL query values). */
export function filtersOfPreset(pf: PresetFilters): Filters {
  const out: Filters = {};
  const given = pf as Record<string, unknown>;
  for (const k of PRESET_KEYS) {
    const v = given[k];
    if (v !== undefined && v !== null && v !== false && v !== '') out[k] = String(v);
  }
  return out;
}

const SEARCH_MODES = [
  ['exact', 'Exact phrase'],
  ['all', 'All words'],
  ['any', 'Any word'],
] as const;
const MODELS = MODEL_IDS;
const OPERATIONS = ['generate', 'edit', 'upload', 'character', 'product', 'scene'];
const TIERS = ['0.5k', '1k', '2k', '4k'];

/** The filters of a URL query. */
export function filtersOf(query: URLSearchParams): Filters {
  const f: Filters = {};
  for (const k of FILTERS) {
    const v = query.get(k);
    if (v) f[k] = v;
  }
  return f;
}

/** The filters as the typed query of GET /api/images (numbers and booleans converted). */
export function apiQuery(f: Filters) {
  return {
    search: f.search,
    searchMode: f.searchMode as 'exact' | 'all' | 'any' | undefined,
    dateFrom: f.dateFrom,
    dateTo: f.dateTo,
    aspectRatio: f.aspectRatio,
    operationType: f.operationType,
    minSize: num(f.minSize),
    maxSize: num(f.maxSize),
    sessionId: f.sessionId,
    hasNegativePrompt: f.hasNegativePrompt === 'true' ? true : undefined,
    modelId: f.modelId as (typeof MODELS)[number] as never,
    resolutionTier: f.resolutionTier,
    stylePresetId: num(f.stylePresetId),
    productReferenceId: num(f.productReferenceId),
    isReference: f.isReference === 'true' ? true : undefined,
  };
}

function Select(p: { name: FilterName; value?: string; options: readonly (readonly [string, string])[]; onChange: (v: string) => void }) {
  return (
    <div class="field">
      <label for={`f-${p.name}`}>{LABELS[p.name]}</label>
      <select id={`f-${p.name}`} name={p.name} value={p.value ?? ''} onChange={(e) => p.onChange(e.currentTarget.value)}>
        <option value="">Any</option>
        {p.options.map(([v, l]) => (
          <option key={v} value={v}>
            {l}
          </option>
        ))}
      </select>
    </div>
  );
}

function Input(p: {
  name: FilterName;
  value?: string;
  type?: 'text' | 'search' | 'date';
  error?: string;
  onChange: (v: string) => void;
  inputMode?: 'numeric';
}) {
  return (
    <div class={`field${p.error ? ' field-invalid' : ''}`}>
      <label for={`f-${p.name}`}>{LABELS[p.name]}</label>
      <input
        id={`f-${p.name}`}
        name={p.name}
        type={(p.type ?? 'text') as 'text'}
        inputMode={p.inputMode}
        value={p.value ?? ''}
        aria-invalid={p.error ? true : undefined}
        aria-describedby={p.error ? `f-${p.name}-err` : undefined}
        onInput={(e) => p.onChange(e.currentTarget.value)}
      />
      {p.error && (
        <p id={`f-${p.name}-err`} class="field-error" role="alert">
          {p.error}
        </p>
      )}
    </div>
  );
}

function Check(p: { name: FilterName; value?: string; onChange: (v: string) => void }) {
  return (
    <div class="field field-check">
      <input
        id={`f-${p.name}`}
        type="checkbox"
        checked={p.value === 'true'}
        onChange={(e) => p.onChange(e.currentTarget.checked ? 'true' : '')}
      />
      <label for={`f-${p.name}`}>{LABELS[p.name]}</label>
    </div>
  );
}

const pairs = (xs: readonly string[]) => xs.map((x) => [x, x] as const);

/** The filter form; its values live in the URL query (applied on submit). */
export function FilterForm(props: { applied: Filters; fieldErrors: Record<string, string>; onApply: (f: Filters) => void }) {
  const [f, setF] = useState<Filters>(props.applied);
  useEffect(() => setF(props.applied), [JSON.stringify(props.applied)]);
  const [presets, setPresets] = useState<(readonly [string, string])[]>([]);
  const [products, setProducts] = useState<(readonly [string, string])[]>([]);
  useEffect(() => {
    api.GET('/api/style-presets', { params: { query: { limit: 100 } } }).then((r) => {
      setPresets((r.data?.data ?? []).map((p) => [String(p.id), p.name] as const));
    });
    api.GET('/api/products', { params: { query: { page_size: 100 } } }).then((r) => {
      setProducts((r.data?.data ?? []).map((p) => [String(p.id), p.productName] as const));
    });
  }, []);
  const set = (k: FilterName) => (v: string) => setF((old) => ({ ...old, [k]: v || undefined }));
  const err = props.fieldErrors;
  return (
    <form
      class="gallery-filters"
      aria-label="Filters"
      onSubmit={(e) => {
        e.preventDefault();
        props.onApply(f);
      }}
    >
      <Input name="search" type="search" value={f.search} error={err.search} onChange={set('search')} />
      <Select name="searchMode" value={f.searchMode} options={SEARCH_MODES} onChange={set('searchMode')} />
      <Input name="dateFrom" type="date" value={f.dateFrom} error={err.dateFrom} onChange={set('dateFrom')} />
      <Input name="dateTo" type="date" value={f.dateTo} error={err.dateTo} onChange={set('dateTo')} />
      <Select name="aspectRatio" value={f.aspectRatio} options={pairs(RATIOS)} onChange={set('aspectRatio')} />
      <Select name="operationType" value={f.operationType} options={pairs(OPERATIONS)} onChange={set('operationType')} />
      <Input name="minSize" inputMode="numeric" value={f.minSize} error={err.minSize} onChange={set('minSize')} />
      <Input name="maxSize" inputMode="numeric" value={f.maxSize} error={err.maxSize} onChange={set('maxSize')} />
      <Input name="sessionId" value={f.sessionId} error={err.sessionId} onChange={set('sessionId')} />
      <Select name="modelId" value={f.modelId} options={pairs(MODELS)} onChange={set('modelId')} />
      <Select name="resolutionTier" value={f.resolutionTier} options={pairs(TIERS)} onChange={set('resolutionTier')} />
      <Select name="stylePresetId" value={f.stylePresetId} options={presets} onChange={set('stylePresetId')} />
      <Select name="productReferenceId" value={f.productReferenceId} options={products} onChange={set('productReferenceId')} />
      <Check name="hasNegativePrompt" value={f.hasNegativePrompt} onChange={set('hasNegativePrompt')} />
      <Check name="isReference" value={f.isReference} onChange={set('isReference')} />
      <div class="row gallery-filter-actions">
        <Button type="submit" variant="primary">
          Apply filters
        </Button>
        <Button type="button" onClick={() => props.onApply({})}>
          Clear filters
        </Button>
      </div>
    </form>
  );
}
