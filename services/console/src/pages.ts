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
  { path: '/gallery', area: 'tenant', title: 'Gallery', nav: 'Gallery', load: () => import('./pages/gallery') },
  { path: '/studio', area: 'tenant', title: 'Studio', nav: 'Studio', load: () => import('./pages/studio') },
  { path: '/images/:id', area: 'tenant', title: 'Image', load: () => import('./pages/image') },
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
  { path: '/admin/stats', area: 'admin', title: 'Dashboard', nav: 'Dashboard', load: () => import('./pages/admin-stats') },
  { path: '/admin/tenants', area: 'admin', title: 'Tenants', nav: 'Tenants', load: () => import('./pages/admin-tenants') },
  { path: '/admin/tenants/:tenantId', area: 'admin', title: 'Tenant', load: () => import('./pages/admin-tenant') },
  { path: '/admin/users', area: 'admin', title: 'Admin users', nav: 'Admin users', load: () => import('./pages/admin-users') },
  { path: '/admin/invitations', area: 'admin', title: 'Invitations', nav: 'Invitations', load: () => import('./pages/admin-invitations') },
  { path: '/invitation', area: 'public', title: 'Accept an invitation', load: () => import('./pages/invitation-accept') },
];

/** Where a signed-in user lands. */
export const HOME: Record<Exclude<Area, 'public'>, string> = { tenant: '/', admin: '/admin' };
