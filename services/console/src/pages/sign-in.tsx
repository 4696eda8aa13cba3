/** Sign-in: a tenant with an API key, or an administrator with email and password (never the legacy admin token). */
import { useEffect, useState } from 'preact/hooks';
import type { Problem } from '../api';
import { Button, ErrorBanner, Field } from '../components/ui';
import { HOME, type PageProps } from '../pages';
import { currentLocation, navigate } from '../router';
import { type Session, signIn, useSession } from '../session';

/** Where to go after signing in: the remembered page (an app path only, never another site). */
function nextOf(query: URLSearchParams, kind: Session['kind']): string {
  const next = query.get('next') ?? '';
  if (!next.startsWith('/') || next.startsWith('//')) return HOME[kind];
  const isAdminPath = next === '/admin' || next.startsWith('/admin/') || next.startsWith('/admin?');
  return isAdminPath === (kind === 'admin') ? next : HOME[kind];
}

export default function SignIn({ query }: PageProps) {
  const session = useSession();
  const [mode, setMode] = useState<'tenant' | 'admin'>(query.get('next')?.startsWith('/admin') ? 'admin' : 'tenant');
  const [apiKey, setApiKey] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<Problem>();

  // Signed in (now, or already when this page opened): on to the remembered page.
  const next = session ? nextOf(query, session.kind) : undefined;
  useEffect(() => {
    // Once: this page may render again (with the next page's query) before the shell replaces it.
    if (next && currentLocation().path === '/sign-in') navigate(next, { replace: true });
  }, [next]);
  if (session) return null;

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setProblem(undefined);
    try {
      const p = await signIn(mode === 'tenant' ? { apiKey: apiKey.trim() } : { email, password });
      if (p) setProblem(p);
      else {
        setApiKey('');
        setPassword('');
      }
    } catch (err) {
      setProblem({ status: 0, title: `No answer from the server: ${String(err)}`, details: [], fields: {} });
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="card signin" aria-labelledby="signin-title">
      <h1 id="signin-title">Sign in to imagegen</h1>
      {query.get('next') && (
        <p class="muted">Sign in to continue to the page you opened (a session ends after 12 hours or when signed out).</p>
      )}
      <fieldset class="tabs">
        <legend class="sr-only">Sign in as</legend>
        <Button variant={mode === 'tenant' ? 'primary' : 'quiet'} aria-pressed={mode === 'tenant'} onClick={() => setMode('tenant')}>
          Tenant (API key)
        </Button>
        <Button variant={mode === 'admin' ? 'primary' : 'quiet'} aria-pressed={mode === 'admin'} onClick={() => setMode('admin')}>
          Administrator
        </Button>
      </fieldset>
      <form onSubmit={submit} noValidate>
        {mode === 'tenant' ? (
          <Field
            label="API key"
            name="apiKey"
            type="password"
            autoComplete="off"
            value={apiKey}
            onInput={setApiKey}
            required
            hint="sk_live_… or sk_test_…; kept by the server for this session only, never in the browser."
            error={problem?.fields.apiKey}
          />
        ) : (
          <>
            <Field label="Email" name="email" type="email" autoComplete="username" value={email} onInput={setEmail} required />
            <Field
              label="Password"
              name="password"
              type="password"
              autoComplete="current-password"
              value={password}
              onInput={setPassword}
              required
            />
          </>
        )}
        <ErrorBanner problem={problem} />
        <Button type="submit" variant="primary" busy={busy}>
          Sign in
        </Button>
      </form>
    </section>
  );
}
