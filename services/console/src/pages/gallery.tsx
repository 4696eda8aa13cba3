/**
 * Gallery (issue 38 item 3): the tenant's images newest first, with every list filter of SPEC 4.1 held in the URL
 * query, keyset-paged by cursor. "Load more" (and scrolling to the end) appends the next page, so a gallery of
 * 10,000 images never loads at once; thumbnails are lazy with their width and height known, so nothing jumps.
 * The cursor of the first page shown is kept in the URL (a reload or Back returns to the same place).
 * Saved searches (SPEC 4.6) apply, save and delete filter sets; tiles are selected for a bulk delete (at most
 * MAX_BULK_DELETE, each image's failure shown) or a ZIP download (at most MAX_DOWNLOAD_IDS).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { MAX_BULK_DELETE, MAX_DOWNLOAD_IDS, MODEL_IDS, RATIOS, SEARCH_PRESET_NAME_MAX } from '../../../../libs/api-schemas/src/vocab';
import { api, networkProblem, type Problem, problem } from '../api';
import { type BulkDeleteResult, formatBytes, type Image, type SearchPreset } from '../components/api-types';
import { Button, ErrorBanner, Field, toast, useConfirm, useLoad } from '../components/ui';
import type { PageProps } from '../pages';
import { Link, setQuery } from '../router';
import './gallery.css';
import './tenant-pages.css';

/** The filters a saved search keeps (SPEC 4.6's filters keys; its sortBy has no place in a newest-first gallery). */
const PRESET_KEYS = [
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
const LABELS: Record<FilterName, string> = {
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

/** Saved searches (SPEC 4.6): apply one (its filters become the URL's), save the current filters, delete one. */
function SavedSearches(props: { applied: Filters; onApply: (f: Filters) => void }) {
  const list = useLoad(async () => {
    const r = await api.GET('/api/search-presets');
    return { value: r.data?.data, problem: problem(r) };
  }, []);
  const presets = list.value ?? [];
  const [chosen, setChosen] = useState('');
  const [name, setName] = useState('');
  const [saving, setSaving] = useState(false);
  const [saveProblem, setSaveProblem] = useState<Problem>();
  const [actionProblem, setActionProblem] = useState<Problem>();
  const confirm = useConfirm();
  const current = presets.find((x) => String(x.id) === chosen);
  const notKept = FILTERS.filter((k) => props.applied[k] && !(PRESET_KEYS as readonly FilterName[]).includes(k));
  // The API's words for the name (empty, too long, taken) go next to the field; anything else under the form.
  const nameError =
    saveProblem &&
    (saveProblem.fields.presetName ?? (/presetName|preset with name/i.test(saveProblem.title) ? saveProblem.title : undefined));

  const save = async (e: Event) => {
    e.preventDefault();
    setSaving(true);
    try {
      const r = await api.POST('/api/search-presets', { body: { presetName: name, filters: presetFiltersOf(props.applied) } });
      setSaveProblem(problem(r));
      if (!r.data) return;
      toast(`Saved the search "${r.data.data.presetName}"`);
      setName('');
      setChosen(String(r.data.data.id));
      list.reload();
    } catch (err) {
      setSaveProblem(networkProblem(err));
    } finally {
      setSaving(false);
    }
  };
  const remove = async () => {
    if (!current) return;
    const sure = await confirm.ask({
      title: `Delete the saved search ${current.presetName}?`,
      body: <p>Only the saved search is deleted: no image changes.</p>,
      confirmLabel: 'Delete',
    });
    if (!sure) return;
    const r = await api.DELETE('/api/search-presets/{id}', { params: { path: { id: String(current.id) } } });
    setActionProblem(problem(r));
    if (!r.response.ok) return;
    toast(`Deleted the saved search "${current.presetName}"`);
    setChosen('');
    list.reload();
  };
  const sortBy = current?.filters.sortBy;

  return (
    <section class="card saved-searches" aria-labelledby="saved-searches-title">
      <h2 id="saved-searches-title">Saved searches</h2>
      {confirm.dialog}
      <div class="row">
        <div class="field">
          <label for="saved-search">Saved search</label>
          <select id="saved-search" value={chosen} onChange={(e) => setChosen(e.currentTarget.value)}>
            <option value="">{presets.length ? 'Choose one…' : 'None saved yet'}</option>
            {presets.map((x) => (
              <option key={x.id} value={String(x.id)}>
                {x.presetName}
              </option>
            ))}
          </select>
        </div>
        <Button disabled={!current} onClick={() => current && props.onApply(filtersOfPreset(current.filters))}>
          Apply saved search
        </Button>
        <Button variant="danger" disabled={!current} onClick={() => void remove()}>
          Delete saved search
        </Button>
      </div>
      {sortBy && sortBy !== 'newest' && (
        <p class="muted">This saved search sorts by {sortBy}; the gallery shows its images newest first.</p>
      )}
      <ErrorBanner problem={list.problem ?? actionProblem} />
      <form class="row" onSubmit={save} noValidate aria-label="Save the current filters">
        <Field label="Name of the saved search" value={name} onInput={setName} max={SEARCH_PRESET_NAME_MAX} error={nameError} />
        <Button type="submit" busy={saving}>
          Save current filters
        </Button>
      </form>
      {notKept.length > 0 && <p class="muted">Not kept in a saved search: {notKept.map((k) => LABELS[k]).join(', ')}.</p>}
      {!nameError && <ErrorBanner problem={saveProblem} />}
    </section>
  );
}

/** Saves a Blob under `name` (an object URL and an <a download>; the URL is released once the download started). */
function saveBlob(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** What a bulk delete did: how many went, and each failed image's id and reason. */
function DeleteOutcome({ result, onDismiss }: { result: BulkDeleteResult; onDismiss: () => void }) {
  const { summary, failed } = result;
  const said = `Deleted ${summary.succeeded} of ${summary.total} image${summary.total === 1 ? '' : 's'}.`;
  return (
    <div class={`banner ${failed.length ? 'banner-error' : 'banner-ok'}`} role={failed.length ? 'alert' : 'status'}>
      <p>
        <strong>{said}</strong>
        {failed.length > 0 && ` ${failed.length} could not be deleted (still selected):`}
      </p>
      {failed.length > 0 && (
        <ul class="banner-list" aria-label="Images not deleted">
          {failed.map((f) => (
            <li key={f.id}>
              Image {f.id}: {f.error}
            </li>
          ))}
        </ul>
      )}
      <button type="button" class="btn btn-quiet" onClick={onDismiss}>
        Dismiss
      </button>
    </div>
  );
}

/** The selection's toolbar: count, select all shown / clear, bulk delete (confirmed first) and the ZIP download. */
function SelectionBar(props: {
  selected: number[];
  shown: number;
  onSelectAll: () => void;
  onClear: () => void;
  onDeleted: (r: BulkDeleteResult) => void;
}) {
  const n = props.selected.length;
  const [deleting, setDeleting] = useState(false);
  const [zipping, setZipping] = useState(false);
  const [prob, setProb] = useState<Problem>();
  const confirm = useConfirm();
  const tooManyToDelete = n > MAX_BULK_DELETE;
  const tooManyToZip = n > MAX_DOWNLOAD_IDS;

  const bulkDelete = async () => {
    const ids = props.selected;
    const sure = await confirm.ask({
      title: `Delete ${ids.length} image${ids.length === 1 ? '' : 's'}?`,
      body: <p>The selected images and their files are deleted. Edits made from them stay (they keep the link).</p>,
      confirmLabel: `Delete ${ids.length}`,
    });
    if (!sure) return;
    setDeleting(true);
    try {
      const r = await api.POST('/api/images/delete-bulk', { body: { ids } });
      setProb(problem(r));
      if (r.data) props.onDeleted(r.data.data);
    } catch (err) {
      setProb(networkProblem(err));
    } finally {
      setDeleting(false);
    }
  };
  const download = async () => {
    setZipping(true);
    try {
      const r = await api.POST('/api/images/download', { body: { imageIds: props.selected }, parseAs: 'blob' });
      const p = problem(r);
      setProb(p);
      if (!p && r.data) saveBlob(r.data as Blob, 'images.zip');
    } catch (err) {
      setProb(networkProblem(err));
    } finally {
      setZipping(false);
    }
  };

  return (
    <section class="selection-bar" aria-label="Selection">
      {confirm.dialog}
      <p class="selection-count" aria-live="polite">
        {n === 0 ? 'No image selected' : `${n} selected`}
      </p>
      <div class="row">
        <Button onClick={props.onSelectAll} disabled={props.shown === 0}>
          Select all shown
        </Button>
        <Button onClick={props.onClear} disabled={n === 0}>
          Clear selection
        </Button>
        <Button
          variant="danger"
          busy={deleting}
          disabled={n === 0 || tooManyToDelete}
          aria-describedby={tooManyToDelete ? 'too-many-to-delete' : undefined}
          onClick={() => void bulkDelete()}
        >
          Delete selected
        </Button>
        <Button
          busy={zipping}
          disabled={n === 0 || tooManyToZip}
          aria-describedby={tooManyToZip ? 'too-many-to-zip' : undefined}
          onClick={() => void download()}
        >
          Download ZIP
        </Button>
      </div>
      {tooManyToDelete && (
        <p id="too-many-to-delete" class="selection-note">
          Delete takes at most {MAX_BULK_DELETE} images at a time: {n} are selected. Clear some to delete them.
        </p>
      )}
      {tooManyToZip && (
        <p id="too-many-to-zip" class="selection-note">
          A ZIP holds at most {MAX_DOWNLOAD_IDS} images: {n} are selected.
        </p>
      )}
      <ErrorBanner problem={prob} onDismiss={() => setProb(undefined)} />
    </section>
  );
}

/** Pages the grid keeps at most (scrolled past ones are dropped and brought back on demand). */
export const MAX_PAGES = 8;
interface GridPage {
  /** The cursor that reads this page (undefined: the first). */
  cursor: string | undefined;
  images: Image[];
}
interface GridWindow {
  pages: GridPage[];
  /** Cursors of the pages dropped above the first shown, the nearest last. */
  earlier: (string | undefined)[];
  /** The cursor of the page after the last shown (null: none). */
  next: string | null;
}
const EMPTY_WINDOW: GridWindow = { pages: [], earlier: [], next: null };

/** The window once `page` is read: the only page, or added at an end, dropping one at the other end past MAX_PAGES. */
export function placePage(w: GridWindow, page: GridPage, after: string | null, how: 'replace' | 'append' | 'prepend'): GridWindow {
  if (how === 'replace') return { pages: [page], earlier: [], next: after };
  if (how === 'append') {
    const pages = [...w.pages, page];
    if (pages.length <= MAX_PAGES) return { ...w, pages, next: after };
    const [dropped, ...kept] = pages;
    return { pages: kept, earlier: [...w.earlier, dropped.cursor], next: after };
  }
  const pages = [page, ...w.pages];
  const earlier = w.earlier.slice(0, -1);
  if (pages.length <= MAX_PAGES) return { ...w, pages, earlier };
  const dropped = pages.pop() as GridPage;
  return { pages, earlier, next: dropped.cursor ?? null };
}

/** Whether the filter panel starts open: on screens wider than a phone. */
const filtersOpenAtFirst = typeof matchMedia === 'undefined' || matchMedia('(min-width: 700px)').matches;

export default function Gallery({ query }: PageProps) {
  const filters = filtersOf(query);
  const key = JSON.stringify(filters);
  const start = query.get('cursor') ?? undefined;
  // The page size (the API's limit, 1-100) may be set in the URL; 40 by default.
  const limit = Math.min(100, Math.max(1, Number(query.get('limit')) || PAGE));
  // The grid holds at most MAX_PAGES pages: scrolling on drops the earliest, whose cursors are kept to bring them
  // back ("Show earlier images"), so the page stays light however far one scrolls (10,000 images: 8 pages).
  const [win, setWin] = useState<GridWindow>(EMPTY_WINDOW);
  const images = win.pages.flatMap((p) => p.images);
  const [total, setTotal] = useState<{ n: number; exact: boolean }>();
  const [busy, setBusy] = useState(true);
  const [prob, setProb] = useState<Problem>();
  const [selected, setSelected] = useState<number[]>([]);
  const [outcome, setOutcome] = useState<BulkDeleteResult>();
  const gen = useRef(0);

  async function loadPage(cursor: string | undefined, how: 'replace' | 'append' | 'prepend') {
    const mine = ++gen.current;
    setBusy(true);
    const r = await api.GET('/api/images', { params: { query: { ...apiQuery(filters), limit, ...(cursor ? { cursor } : {}) } } });
    if (mine !== gen.current) return;
    setBusy(false);
    const p = problem(r);
    setProb(p);
    if (!r.data) return;
    const page = { cursor, images: r.data.data };
    const after = r.data.pagination.nextCursor ?? null;
    setWin((w) => placePage(w, page, after, how));
    setTotal({ n: r.data.pagination.total, exact: r.data.pagination.totalIsExact });
  }

  useEffect(() => {
    setWin(EMPTY_WINDOW);
    setSelected([]);
    setOutcome(undefined);
    loadPage(start, 'replace');
  }, [key, start, limit]);

  // Infinite scroll: the sentinel after the grid loads the next page when it comes into view.
  const next = win.next;
  const sentinel = useRef<HTMLDivElement>(null);
  const nextRef = useRef<() => void>(() => {});
  nextRef.current = () => {
    if (next && !busy) loadPage(next, 'append');
  };
  // After "Show earlier images" the sentinel loads again only once it has been out of view: a window shorter than
  // the screen would otherwise load the next page at once and drop the earlier one just brought back.
  const armed = useRef(true);
  const showEarlier = () => {
    if (win.earlier.length === 0 || busy) return;
    armed.current = false;
    loadPage(win.earlier[win.earlier.length - 1], 'prepend');
  };
  useEffect(() => {
    const el = sentinel.current;
    if (!el || typeof IntersectionObserver === 'undefined') return;
    const io = new IntersectionObserver(
      (es) => {
        if (!es.some((e) => e.isIntersecting)) armed.current = true;
        else if (armed.current) nextRef.current?.();
      },
      { rootMargin: '600px' },
    );
    io.observe(el);
    return () => io.disconnect();
  }, [images.length, next]); // observed again after each page: a sentinel still in view loads the next one

  const select = (id: number, on: boolean) =>
    setSelected((old) => (on ? [...old.filter((x) => x !== id), id] : old.filter((x) => x !== id)));
  const onDeleted = (r: BulkDeleteResult) => {
    const gone = new Set(r.deleted);
    setWin((w) => ({ ...w, pages: w.pages.map((p) => ({ ...p, images: p.images.filter((im) => !gone.has(im.id)) })) }));
    setTotal((t) => t && { ...t, n: Math.max(0, t.n - gone.size) });
    // The failed ones stay selected (to try again or look at); the deleted ones leave the selection.
    setSelected((old) => old.filter((id) => !gone.has(id)));
    setOutcome(r);
  };
  const chosen = new Set(selected);
  const applyFilters = (f: Filters) => {
    const values: Record<string, string | undefined> = { cursor: undefined };
    for (const k of FILTERS) values[k] = f[k];
    setQuery(values, { push: true });
  };

  return (
    <>
      <h1>Gallery</h1>
      {/* Open on a wide screen; folded on a phone, where the form is two screens tall before the first image. */}
      <details
        class="gallery-filter-panel"
        open={filtersOpenAtFirst || Object.keys(filters).length > 0 || Object.keys(prob?.fields ?? {}).length > 0}
      >
        <summary>
          Filters and saved searches
          {Object.keys(filters).length > 0 && ` (${Object.keys(filters).length} applied)`}
        </summary>
        <SavedSearches applied={filters} onApply={applyFilters} />
        <FilterForm applied={filters} fieldErrors={prob?.fields ?? {}} onApply={applyFilters} />
      </details>
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
      <SelectionBar
        selected={selected}
        shown={images.length}
        onSelectAll={() => setSelected((old) => [...new Set([...old, ...images.map((im) => im.id)])])}
        onClear={() => setSelected([])}
        onDeleted={onDeleted}
      />
      {outcome && <DeleteOutcome result={outcome} onDismiss={() => setOutcome(undefined)} />}
      {images.length === 0 && !busy && !prob && <p>No images match these filters.</p>}
      {win.earlier.length > 0 && (
        <p class="row">
          <Button busy={busy} onClick={showEarlier}>
            Show earlier images
          </Button>
        </p>
      )}
      <ul class="gallery-grid" aria-label="Images, newest first">
        {images.map((im) => (
          <Tile key={im.id} image={im} selected={chosen.has(im.id)} onSelect={(on) => select(im.id, on)} />
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
