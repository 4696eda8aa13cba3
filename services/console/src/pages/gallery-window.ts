/** The gallery grid's window of pages: at most MAX_PAGES kept, the dropped ones' cursors kept to bring them back. */
import type { Image } from '../components/api-types';

/** Pages the grid keeps at most (scrolled past ones are dropped and brought back on demand). */
export const MAX_PAGES = 8;
export interface GridPage {
  /** The cursor that reads this page (undefined: the first). */
  cursor: string | undefined;
  images: Image[];
}
export interface GridWindow {
  pages: GridPage[];
  /** Cursors of the pages dropped above the first shown, the nearest last. */
  earlier: (string | undefined)[];
  /** The cursor of the page after the last shown (null: none). */
  next: string | null;
}
export const EMPTY_WINDOW: GridWindow = { pages: [], earlier: [], next: null };

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
