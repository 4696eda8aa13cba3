/**
 * The public invitation page: the invited person chooses a name and password (POST /admin/invitations/:token/accept),
 * then is signed in through the console's own session (POST /console/session with the new email and password).
 * The token comes in the link's fragment (#inv_...), is kept in memory only and removed from the address bar.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, networkProblem, type Problem, problem } from '../api';
import { Button, ErrorBanner, Field } from '../components/ui';
import { navigate } from '../router';
import { signIn } from '../session';

const PASSWORD_MIN = 12;

function tokenFromAddress(): string {
  const t = decodeURIComponent(location.hash.replace(/^#/, '')).trim();
  if (t) history.replaceState(history.state, '', `${location.pathname}${location.search}`);
  return t;
}

export default function InvitationAccept() {
  const [token, setToken] = useState(tokenFromAddress);
  const [typed, setTyped] = useState('');
  const [info, setInfo] = useState<{ email: string; role: string; status: string; expiresAt: string }>();
  const [infoProblem, setInfoProblem] = useState<Problem>();
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [again, setAgain] = useState('');
  const [busy, setBusy] = useState(false);
  const [p, setP] = useState<Problem>();
  const [local, setLocal] = useState<{ password?: string; again?: string }>({});

  useEffect(() => {
    if (!token) return;
    let live = true;
    setInfoProblem(undefined);
    api.GET('/admin/invitations/{token}', { params: { path: { token } } }).then(
      (r) => {
        if (!live) return;
        setInfo(r.data?.data);
        const err = problem(r);
        setInfoProblem(
          err && (r.response.status === 404 || r.response.status === 410)
            ? { ...err, title: 'This invitation is not valid any more (expired, revoked or already used): ask for a new one.' }
            : err,
        );
      },
      (err) => live && setInfoProblem(networkProblem(err)),
    );
    return () => {
      live = false;
    };
  }, [token]);

  const accept = async (e: Event) => {
    e.preventDefault();
    const l: typeof local = {};
    if (password.length < PASSWORD_MIN) l.password = `password must be at least ${PASSWORD_MIN} characters`;
    if (again !== password) l.again = 'The two passwords differ';
    setLocal(l);
    if (l.password || l.again || !info) return;
    setBusy(true);
    setP(undefined);
    try {
      const r = await api.POST('/admin/invitations/{token}/accept', {
        params: { path: { token } },
        body: { display_name: name.trim(), password },
      });
      const err = problem(r);
      if (err || !r.data) return setP(err);
      // The answer's bearer session is not needed in a browser: end it, and sign in with the console's cookie session.
      await api.POST('/admin/auth/logout', { headers: { authorization: `Bearer ${r.data.data.token}` } }).catch(() => undefined);
      const signInProblem = await signIn({ email: info.email, password });
      if (signInProblem) return setP(signInProblem);
      setPassword('');
      setAgain('');
      navigate('/admin', { replace: true });
    } catch (err) {
      setP(networkProblem(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="card" aria-labelledby="inv-accept-title">
      <h1 id="inv-accept-title">Accept an invitation</h1>
      {!token ? (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            setToken(typed.trim());
          }}
          noValidate
        >
          <p>Open the link you were sent, or paste the invitation code (inv_…) here.</p>
          <Field label="Invitation code" value={typed} onInput={setTyped} autoComplete="off" required />
          <Button type="submit" variant="primary">
            Continue
          </Button>
        </form>
      ) : (
        <>
          <ErrorBanner problem={infoProblem} />
          {!info && !infoProblem && <p aria-busy="true">Loading…</p>}
          {info && info.status === 'pending' && (
            <form onSubmit={accept} noValidate>
              <p>
                You are invited as <strong>{info.role}</strong> with the email <strong>{info.email}</strong>. Choose your name and a
                password; the invitation expires {new Date(info.expiresAt).toLocaleString()}.
              </p>
              <input type="email" hidden value={info.email} autoComplete="username" readOnly />
              <Field
                label="Your name"
                value={name}
                onInput={setName}
                max={100}
                required
                autoComplete="name"
                error={p?.fields.display_name}
              />
              <Field
                label="New password"
                type="password"
                value={password}
                onInput={setPassword}
                required
                autoComplete="new-password"
                hint={`At least ${PASSWORD_MIN} characters`}
                error={local.password ?? p?.fields.password}
              />
              <Field
                label="Repeat the password"
                type="password"
                value={again}
                onInput={setAgain}
                required
                autoComplete="new-password"
                error={local.again}
              />
              <ErrorBanner problem={p} />
              <Button type="submit" variant="primary" busy={busy}>
                Set password and sign in
              </Button>
            </form>
          )}
          {info && info.status !== 'pending' && <p role="alert">This invitation is {info.status}: ask for a new one.</p>}
        </>
      )}
    </section>
  );
}
