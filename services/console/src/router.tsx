/** A small client-side router on the history API, under /console. Paths in the app are written without the base. */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';

export const BASE = '/console';
const listeners = new Set<() => void>();

/** The app path (without /console) and its query of the current URL. */
export function currentLocation(): { path: string; query: URLSearchParams } {
  const p = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : location.pathname;
  return { path: p === '' ? '/' : p, query: new URLSearchParams(location.search) };
}

/** Goes to an app path ("/images/3?x=1"); replace keeps the history entry (e.g. filters typed in a form). */
export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  const url = `${BASE}${to === '/' ? '' : to}`;
  if (opts.replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  for (const l of listeners) l();
  if (!opts.replace) window.scrollTo(0, 0);
}

/** Changes the query of the current page (empty values removed) without a new history entry. */
export function setQuery(values: Record<string, string | undefined>, opts: { push?: boolean } = {}): void {
  const { path, query } = currentLocation();
  for (const [k, v] of Object.entries(values)) {
    if (v === undefined || v === '') query.delete(k);
    else query.set(k, v);
  }
  const qs = query.toString();
  navigate(`${path}${qs ? `?${qs}` : ''}`, { replace: !opts.push });
}

/** The location, re-rendering on navigation (links, back and forward). */
export function useLocation(): { path: string; query: URLSearchParams } {
  const [, tick] = useState(0);
  const rendered = location.href;
  useEffect(() => {
    const l = () => tick((n) => n + 1);
    listeners.add(l);
    window.addEventListener('popstate', l);
    // A navigation between this render and the effect (effects run after the paint) is not missed.
    if (location.href !== rendered) l();
    return () => {
      listeners.delete(l);
      window.removeEventListener('popstate', l);
    };
  }, []);
  return currentLocation();
}

/** Matches "/images/:id" against a path: the params, or undefined. */
export function matchPath(pattern: string, path: string): Record<string, string> | undefined {
  const a = pattern.split('/').filter(Boolean);
  const b = path.split('/').filter(Boolean);
  if (a.length !== b.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < a.length; i++) {
    if (a[i].startsWith(':')) params[a[i].slice(1)] = decodeURIComponent(b[i]);
    else if (a[i] !== b[i]) return undefined;
  }
  return params;
}

/** An in-app link: a real <a href> (open in a new tab works), navigated without a reload on a plain click. */
export function Link(props: {
  href: string;
  children: ComponentChildren;
  class?: string;
  'aria-current'?: 'page';
  'aria-label'?: string;
  onClick?: () => void;
}) {
  const { href, children, onClick, ...rest } = props;
  return (
    <a
      {...rest}
      href={`${BASE}${href === '/' ? '' : href}`}
      onClick={(e) => {
        onClick?.();
        if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(href);
      }}
    >
      {children}
    </a>
  );
}
