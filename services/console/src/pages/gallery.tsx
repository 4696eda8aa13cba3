/**
 * Gallery (issue 38 item 3): the tenant's images newest first, with every list filter of SPEC 4.1 held in the URL
 * query, keyset-paged by cursor. "Load more" (and scrolling to the end) appends the next page, so a gallery of
 * 10,000 images never loads at once; thumbnails are lazy with their width and height known, so nothing jumps.
 * The cursor of the first page shown is kept in the URL (a reload or Back returns to the same place).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { MODEL_IDS, RATIOS } from '../../../../libs/api-schemas/src/vocab';
import { api, type Problem, problem } from '../api';
import { formatBytes, type Image } from '../components/api-types';
import { Button, ErrorBanner } from '../components/ui';
import type { PageProps } from '../pages';
import { Link, setQuery } from '../router';
import './gallery.css';

/** The filters of GET /api/images (SPEC 4.1), as URL query names (the API's own names). */
export const FILTERS = [
  'search',
  'searchMode',
  'dateFrom',
  'dateTo',
  'aspectRatio',
  'operationType',
  'minSize',
  'maxSize',
  'sessionId',
  'modelId',
  'resolutionTier',
  'stylePresetId',
  'productReferenceId',
  'isReference',
] as const;
export type FilterName = (typeof FILTERS)[number];
export type Filters = Partial<Record<FilterName, string>>;

const SEARCH_MODES = [
  ['exact', 'Exact phrase'],
  ['all', 'All words'],
  ['any', 'Any word'],
] as const;
const MODELS = MODEL_IDS;
const OPERATIONS = ['generate', 'edit', 'upload', 'character', 'product', 'scene'];
const TIERS = ['0.5k', '1k', '2k', '4k'];
const PAGE = 40;

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
  const num = (v?: string) => (v && /^\d+$/.test(v) ? Number(v) : undefined);
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
    modelId: f.modelId as (typeof MODELS)[number] as never,
    resolutionTier: f.resolutionTier,
    stylePresetId: num(f.stylePresetId),
    productReferenceId: num(f.productReferenceId),
    isReference: f.isReference === 'true' ? true : undefined,
  };
}

function Select(p: {
  label: string;
  name: FilterName;
  value?: string;
  options: readonly (readonly [string, string])[];
  onChange: (v: string) => void;
}) {
  return (
    <div class="field">
      <label for={`f-${p.name}`}>{p.label}</label>
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
  label: string;
  name: FilterName;
  value?: string;
  type?: 'text' | 'search' | 'date';
  error?: string;
  onChange: (v: string) => void;
  inputMode?: 'numeric';
}) {
  return (
    <div class={`field${p.error ? ' field-invalid' : ''}`}>
      <label for={`f-${p.name}`}>{p.label}</label>
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
      <Input label="Search prompts" name="search" type="search" value={f.search} error={err.search} onChange={set('search')} />
      <Select label="Search mode" name="searchMode" value={f.searchMode} options={SEARCH_MODES} onChange={set('searchMode')} />
      <Input label="From date" name="dateFrom" type="date" value={f.dateFrom} error={err.dateFrom} onChange={set('dateFrom')} />
      <Input label="To date" name="dateTo" type="date" value={f.dateTo} error={err.dateTo} onChange={set('dateTo')} />
      <Select label="Aspect ratio" name="aspectRatio" value={f.aspectRatio} options={pairs(RATIOS)} onChange={set('aspectRatio')} />
      <Select label="Operation" name="operationType" value={f.operationType} options={pairs(OPERATIONS)} onChange={set('operationType')} />
      <Input label="Min size (bytes)" name="minSize" inputMode="numeric" value={f.minSize} error={err.minSize} onChange={set('minSize')} />
      <Input label="Max size (bytes)" name="maxSize" inputMode="numeric" value={f.maxSize} error={err.maxSize} onChange={set('maxSize')} />
      <Input label="Session" name="sessionId" value={f.sessionId} error={err.sessionId} onChange={set('sessionId')} />
      <Select label="Model" name="modelId" value={f.modelId} options={pairs(MODELS)} onChange={set('modelId')} />
      <Select
        label="Resolution tier"
        name="resolutionTier"
        value={f.resolutionTier}
        options={pairs(TIERS)}
        onChange={set('resolutionTier')}
      />
      <Select label="Style preset" name="stylePresetId" value={f.stylePresetId} options={presets} onChange={set('stylePresetId')} />
      <Select
        label="Product"
        name="productReferenceId"
        value={f.productReferenceId}
        options={products}
        onChange={set('productReferenceId')}
      />
      <div class="field field-check">
        <input
          id="f-isReference"
          type="checkbox"
          checked={f.isReference === 'true'}
          onChange={(e) => set('isReference')(e.currentTarget.checked ? 'true' : '')}
        />
        <label for="f-isReference">Reference images only</label>
      </div>
      <div class="row gallery-filter-actions">
        <Button type="submit" variant="primary">
          Apply filters
        </Button>
        <Button type="button" onClick={() => props.onApply({})}>
          Clear
        </Button>
      </div>
    </form>
  );
}

/** A thumbnail tile (its box sized from the image's own width and height, so nothing jumps while it loads). */
export function Tile(p: { image: Image; selected?: boolean; onSelect?: (on: boolean) => void }) {
  const im = p.image;
  return (
    <li class={`tile${p.selected ? ' tile-selected' : ''}`}>
      <Link href={`/images/${im.id}`} aria-label={`Image ${im.id}: ${im.prompt.slice(0, 80)}`}>
        <img src={im.thumbnailUrl} alt="" width={im.width} height={im.height} loading="lazy" decoding="async" />
      </Link>
      <div class="tile-meta">
        {p.onSelect && (
          <input
            type="checkbox"
            aria-label={`Select image ${im.id}`}
            checked={p.selected}
            onChange={(e) => p.onSelect?.(e.currentTarget.checked)}
          />
        )}
        <span class="tile-caption">
          {im.operation} · {im.aspectRatio} · {formatBytes(im.sizeBytes)}
        </span>
      </div>
    </li>
  );
}

export default function Gallery({ query }: PageProps) {
  const filters = filtersOf(query);
  const key = JSON.stringify(filters);
  const start = query.get('cursor') ?? undefined;
  // The page size (the API's limit, 1-100) may be set in the URL; 40 by default.
  const limit = Math.min(100, Math.max(1, Number(query.get('limit')) || PAGE));
  const [images, setImages] = useState<Image[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [total, setTotal] = useState<{ n: number; exact: boolean }>();
  const [busy, setBusy] = useState(true);
  const [prob, setProb] = useState<Problem>();
  const gen = useRef(0);

  async function loadPage(cursor: string | undefined, append: boolean) {
    const mine = ++gen.current;
    setBusy(true);
    const r = await api.GET('/api/images', { params: { query: { ...apiQuery(filters), limit, ...(cursor ? { cursor } : {}) } } });
    if (mine !== gen.current) return;
    setBusy(false);
    const p = problem(r);
    setProb(p);
    if (!r.data) return;
    const page = r.data.data;
    setImages((old) => (append ? [...old, ...page] : page));
    setNext(r.data.pagination.nextCursor ?? null);
    setTotal({ n: r.data.pagination.total, exact: r.data.pagination.totalIsExact });
  }

  useEffect(() => {
    setImages([]);
    loadPage(start, false);
  }, [key, start, limit]);

  // Infinite scroll: the sentinel after the grid loads the next page when it comes into view.
  const sentinel = useRef<HTMLDivElement>(null);
  const nextRef = useRef<() => void>(() => {});
  nextRef.current = () => {
    if (next && !busy) loadPage(next, true);
  };
  useEffect(() => {
    const el = sentinel.current;
    if (!el || typeof IntersectionObserver === 'undefined') return;
    const io = new IntersectionObserver((es) => es.some((e) => e.isIntersecting) && nextRef.current?.(), { rootMargin: '600px' });
    io.observe(el);
    return () => io.disconnect();
  }, [images.length, next]); // observed again after each page: a sentinel still in view loads the next one

  return (
    <>
      <h1>Gallery</h1>
      <FilterForm
        applied={filters}
        fieldErrors={prob?.fields ?? {}}
        onApply={(f) => {
          const values: Record<string, string | undefined> = { cursor: undefined };
          for (const k of FILTERS) values[k] = f[k];
          setQuery(values, { push: true });
        }}
      />
      <ErrorBanner problem={prob} />
      <p class="gallery-count" aria-live="polite">
        {busy && images.length === 0
          ? 'Loading…'
          : total
            ? `${images.length.toLocaleString()} shown of ${total.exact ? '' : 'about '}${total.n.toLocaleString()}`
            : ''}
      </p>
      {start && (
        <p>
          <Button onClick={() => setQuery({ cursor: undefined })}>Back to the newest</Button>
        </p>
      )}
      {images.length === 0 && !busy && !prob && <p>No images match these filters.</p>}
      <ul class="gallery-grid" aria-label="Images, newest first">
        {images.map((im) => (
          <Tile key={im.id} image={im} />
        ))}
      </ul>
      <div ref={sentinel} class="gallery-sentinel" />
      {next && (
        <p class="row">
          <Button busy={busy} onClick={() => nextRef.current?.()}>
            Load more
          </Button>
        </p>
      )}
    </>
  );
}
