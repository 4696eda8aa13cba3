/** The app shell: resolves the page of the URL, asks for sign-in where needed, lays out the navigation. */
import type { ComponentType } from 'preact';
import { useEffect, useLayoutEffect, useState } from 'preact/hooks';
import { Toasts } from './components/ui';
import { HOME, PAGES, type PageDef, type PageProps } from './pages';
import { Link, matchPath, navigate, useLocation } from './router';
import { isSuperAdmin, type Session, signOut, useSession } from './session';

function resolve(path: string): { page: PageDef; params: Record<string, string> } | undefined {
  for (const page of PAGES) {
    const params = matchPath(page.path, path);
    if (params) return { page, params };
  }
  return undefined;
}

const loaded = new Map<PageDef, ComponentType<PageProps>>();

function PageView({ page, params, query }: { page: PageDef } & PageProps) {
  const [Comp, setComp] = useState<ComponentType<PageProps> | undefined>(() => loaded.get(page));
  const [failed, setFailed] = useState<string>();
  // The route's title, until the page sets its own (usePageTitle, a passive effect): a layout effect runs before
  // any passive effect of the same render, so a page already loaded keeps its own title ("Tenant acme", not "Tenant").
  useLayoutEffect(() => {
    document.title = `${page.title} · imagegen console`;
  }, [page]);
  useEffect(() => {
    const have = loaded.get(page);
    if (have) return setComp(() => have);
    setComp(undefined);
    let live = true;
    page.load().then(
      (m) => {
        loaded.set(page, m.default);
        if (live) setComp(() => m.default);
      },
      (err) => live && setFailed(String(err)),
    );
    return () => {
      live = false;
    };
  }, [page]);
  if (failed) return <p role="alert">This page could not be loaded ({failed}): reload the console.</p>;
  if (!Comp) return <p aria-busy="true">Loading…</p>;
  return <Comp params={params} query={query} />;
}

function Nav({ session }: { session: Session }) {
  const { path } = useLocation();
  const items = PAGES.filter((p) => p.area === session.kind && p.nav && (!p.superAdmin || isSuperAdmin(session)));
  const [open, setOpen] = useState(false);
  const who = session.kind === 'admin' ? `${session.admin.email} (${session.admin.role})` : `Tenant ${session.tenantId}`;
  return (
    <header class="topbar">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <Link href={HOME[session.kind]} class="brand">
        imagegen
      </Link>
      <button type="button" class="btn btn-quiet menu-toggle" aria-expanded={open} aria-controls="nav" onClick={() => setOpen(!open)}>
        Menu
      </button>
      <nav id="nav" aria-label="Main" class={open ? 'open' : ''}>
        <ul>
          {items.map((p) => (
            <li key={p.path}>
              <Link href={p.path} aria-current={matchPath(p.path, path) ? 'page' : undefined} onClick={() => setOpen(false)}>
                {p.nav}
              </Link>
            </li>
          ))}
        </ul>
      </nav>
      <div class="who">
        <span>{who}</span>
        <button
          type="button"
          class="btn btn-quiet"
          onClick={async () => {
            await signOut();
            navigate('/sign-in', { replace: true });
          }}
        >
          Sign out
        </button>
      </div>
    </header>
  );
}

export function App() {
  const session = useSession();
  const { path, query } = useLocation();
  const found = resolve(path);

  // Signed out (or the session ended) on a page that needs one: the sign-in page, remembering where we were.
  const needsSignIn = session === null && found?.page.area !== 'public';
  const wrongArea = session && found && found.page.area !== 'public' && found.page.area !== session.kind;
  useEffect(() => {
    if (needsSignIn) {
      const here = `${path}${location.search}`;
      navigate(`/sign-in${path === '/' && !location.search ? '' : `?next=${encodeURIComponent(here)}`}`, { replace: true });
    } else if (wrongArea && session) navigate(HOME[session.kind], { replace: true });
  }, [needsSignIn, wrongArea, path, session]);

  if (session === undefined) return <p aria-busy="true">Loading…</p>;
  if (!found) {
    document.title = 'Not found · imagegen console';
    return (
      <main id="main" class="page">
        <h1>Page not found</h1>
        <p>
          <Link href="/">Back to the console</Link>
        </p>
      </main>
    );
  }
  if (found.page.area === 'public' || !session) {
    return (
      <>
        <main id="main" class="page page-narrow">
          {found.page.area === 'public' && <PageView page={found.page} params={found.params} query={query} />}
        </main>
        <Toasts />
      </>
    );
  }
  if (wrongArea) return null;
  return (
    <>
      <Nav session={session} />
      <main id="main" class="page" tabIndex={-1}>
        <PageView page={found.page} params={found.params} query={query} />
      </main>
      <Toasts />
    </>
  );
}
