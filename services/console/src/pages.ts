/**
 * Every page of the console: its path (under /console), who may see it, its title, its place in the navigation
 * and its module (loaded when first opened, so the first page stays small). Adding a page: one entry here and
 * one file under pages/ (see /work/wt/console-shell.md or the README's "Web console").
 */
import type { ComponentType } from 'preact';

export type Area = 'public' | 'tenant' | 'admin';

export interface PageProps {
  /** The path's parameters (":id" -> params.id). */
  params: Record<string, string>;
  /** The URL query (filters, cursors; never a credential). */
  query: URLSearchParams;
}

export interface PageDef {
  path: string;
  area: Area;
  /** The document title (the page may refine it with usePageTitle). */
  title: string;
  /** The navigation label; no label: not in the navigation. */
  nav?: string;
  /** Shown to a super_admin only (the API enforces it too). */
  superAdmin?: boolean;
  load: () => Promise<{ default: ComponentType<PageProps> }>;
}

export const PAGES: PageDef[] = [
  { path: '/sign-in', area: 'public', title: 'Sign in', load: () => import('./pages/sign-in') },
  // ---- tenant ----
  { path: '/', area: 'tenant', title: 'Overview', nav: 'Overview', load: () => import('./pages/tenant-home') },
  { path: '/assets', area: 'tenant', title: 'Saved assets', nav: 'Assets', load: () => import('./pages/assets') },
  { path: '/assets/:kind', area: 'tenant', title: 'Saved assets', load: () => import('./pages/assets') },
  { path: '/sessions', area: 'tenant', title: 'Sessions', nav: 'Sessions', load: () => import('./pages/sessions') },
  { path: '/sessions/:id', area: 'tenant', title: 'Session', load: () => import('./pages/session') },
  { path: '/executions/:id', area: 'tenant', title: 'Execution', load: () => import('./pages/execution') },
  { path: '/usage', area: 'tenant', title: 'Usage', nav: 'Usage', load: () => import('./pages/usage') },
  { path: '/webhooks', area: 'tenant', title: 'Webhooks', nav: 'Webhooks', load: () => import('./pages/webhooks') },
  { path: '/webhooks/:id', area: 'tenant', title: 'Webhook', load: () => import('./pages/webhook') },
  // ---- admin ----
  { path: '/admin', area: 'admin', title: 'Admin', nav: 'Admin', load: () => import('./pages/admin-home') },
];

/** Where a signed-in user lands. */
export const HOME: Record<Exclude<Area, 'public'>, string> = { tenant: '/', admin: '/admin' };
