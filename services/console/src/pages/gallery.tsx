/**
 * Gallery (issue 38 item 3): the tenant's images newest first, with every list filter of SPEC 4.1 held in the URL
 * query, keyset-paged by cursor. "Load more" (and scrolling to the end) appends the next page, so a gallery of
 * 10,000 images never loads at once, and the grid keeps at most MAX_PAGES pages (gallery-window.ts); thumbnails are
 * lazy with their width and height known, so nothing jumps.
 * The cursor of the first page shown is kept in the URL (a reload or Back returns to the same place).
 * Saved searches (SPEC 4.6) apply, save and delete filter sets; tiles are selected for a bulk delete (at most
 * MAX_BULK_DELETE, each image's failure shown) or a ZIP download (at most MAX_DOWNLOAD_IDS). The parts live beside
 * this page: gallery-filters, gallery-saved-searches, gallery-selection and gallery-window.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, type Problem, problem } from '../api';
import { type BulkDeleteResult, formatBytes, type Image } from '../components/api-types';
import { Button, ErrorBanner } from '../components/ui';
import type { PageProps } from '../pages';
import { Link, setQuery } from '../router';
import { apiQuery, FILTERS, FilterForm, type Filters, filtersOf } from './gallery-filters';
import { SavedSearches } from './gallery-saved-searches';
import { DeleteOutcome, SelectionBar } from './gallery-selection';
import { EMPTY_WINDOW, type GridWindow, placePage } from './gallery-window';
import './gallery.css';
import './tenant-pages.css';

const PAGE = 40;

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
