import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AppError, isScope, type Logger, SCOPES } from '@imagegen/platform';
import type Provider from 'oidc-provider';
import { escapeHtml, HTML_HEADERS, page } from './html.js';
import type { Urls } from './provider.js';

export const API_KEY_PATTERN = /^sk_(live|test)_[a-zA-Z0-9]{32,}$/;

export interface TenantAuth {
  /** AuthenticateApiKey with the sha256 hex hash of the key; throws AppError 401 for unknown keys. */
  authenticateKey(keyHash: string): Promise<{ tenantId: string; tenantActive: boolean }>;
  getTenant(
    tenantId: string,
  ): Promise<{ tenantId: string; tenantName: string; isActive: boolean; rateLimitPerMinute?: number } | undefined>;
}

export interface SigninDeps extends TenantAuth {
  provider: Provider;
  urls: Urls;
  csrfSecret: string;
  logger: Logger;
}

interface View {
  status: number;
  html: string;
}

const send = (res: ServerResponse, v: View) => {
  res.writeHead(v.status, HTML_HEADERS);
  res.end(v.html);
};

const csrfFor = (secret: string, uid: string) => createHmac('sha256', secret).update(`signin:${uid}`).digest('base64url');

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Only our own authorize endpoint is a valid return_to (no open redirect). */
function validReturnTo(urls: Urls, v: unknown): URL | undefined {
  if (typeof v !== 'string' || !v) return undefined;
  try {
    const u = new URL(v, urls.base);
    if (`${u.origin}${u.pathname}` !== `${urls.issuer}/authorize`) return undefined;
    return u;
  } catch {
    return undefined;
  }
}

async function loadInteraction(provider: Provider, req: IncomingMessage, res: ServerResponse): Promise<any | undefined> {
  try {
    return await provider.interactionDetails(req, res);
  } catch {
    return undefined;
  }
}

const requestedScopes = (interaction: any): string[] => [...new Set(String(interaction.params.scope ?? '').split(' '))].filter(isScope);

async function renderForm(
  deps: SigninDeps,
  interaction: any,
  opts: { error?: string; status?: number; checked?: Set<string> } = {},
): Promise<View> {
  const client = await deps.provider.Client.find(String(interaction.params.client_id)).catch(() => undefined);
  const clientName = client?.clientName || 'An application';
  let redirectHost = '';
  try {
    redirectHost = new URL(String(interaction.params.redirect_uri)).host;
  } catch {}
  const sessionTenant: string | undefined = interaction.session?.accountId;
  let sessionTenantName: string | undefined;
  if (sessionTenant) sessionTenantName = (await deps.getTenant(sessionTenant).catch(() => undefined))?.tenantName;
  const keyOptional = !!sessionTenant && interaction.prompt?.name !== 'login';
  const scopes = requestedScopes(interaction);
  const checked = opts.checked ?? new Set(scopes);
  const scopeList = scopes
    .map(
      (s) =>
        `<label class="scope"><input type="checkbox" name="scope" value="${escapeHtml(s)}"${checked.has(s) ? ' checked' : ''}>` +
        `<span>${escapeHtml(SCOPES[s as keyof typeof SCOPES])} <code>${escapeHtml(s)}</code></span></label>`,
    )
    .join('\n');
  const body = `
<h1>Sign in to imagegen</h1>
<p><strong>${escapeHtml(clientName)}</strong> wants to access your imagegen account${
    redirectHost ? ` and will receive the result at <strong>${escapeHtml(redirectHost)}</strong>` : ''
  }.</p>
${opts.error ? `<p class="err" role="alert">${escapeHtml(opts.error)}</p>` : ''}
<form method="post" action="${escapeHtml(`${deps.urls.issuer}/signin`)}" autocomplete="off">
<input type="hidden" name="csrf" value="${escapeHtml(csrfFor(deps.csrfSecret, interaction.uid))}">
${
  sessionTenant
    ? `<p class="hint">Signed in as <strong>${escapeHtml(sessionTenantName ?? sessionTenant)}</strong> (${escapeHtml(sessionTenant)}).${
        keyOptional ? ' Leave the key empty to continue, or enter another tenant’s key.' : ''
      }</p>`
    : ''
}
<label for="api_key">Tenant API key</label>
<input id="api_key" name="api_key" type="password" placeholder="Paste your API key" autocomplete="off" autocapitalize="off" spellcheck="false"${
    keyOptional ? '' : ' required'
  }>
<p class="hint">The key is checked once to identify your tenant; the application never sees it.</p>
${scopes.length ? `<fieldset><legend>Permissions requested</legend>\n${scopeList}\n</fieldset>` : '<p class="err">No permission was requested.</p>'}
<div class="buttons">
<button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="deny" class="secondary" formnovalidate>Deny</button>
</div>
</form>`;
  return { status: opts.status ?? 200, html: page('Sign in', body) };
}

function infoPage(status: number, title: string, message: string): View {
  return { status, html: page(title, `<h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>`) };
}

/**
 * GET / — the sign-in page. With a pending authorization (interaction cookie) it shows the form;
 * with only `return_to` (e.g. the login_url given to a non-HTML client, opened in a browser) it
 * restarts that authorization request, which leads back here with the interaction cookie.
 */
export async function handleSigninPage(deps: SigninDeps, req: IncomingMessage, res: ServerResponse, query: Record<string, unknown>) {
  const interaction = await loadInteraction(deps.provider, req, res);
  const returnTo = validReturnTo(deps.urls, query.return_to);
  const matches =
    interaction &&
    (!returnTo ||
      (returnTo.searchParams.get('client_id') === String(interaction.params.client_id) &&
        (returnTo.searchParams.get('state') ?? undefined) === (interaction.params.state ?? undefined)));
  if (interaction && matches) return send(res, await renderForm(deps, interaction));
  if (returnTo) {
    res.writeHead(302, { location: returnTo.href, 'cache-control': 'no-store' });
    return res.end();
  }
  return send(
    res,
    infoPage(
      200,
      'imagegen sign-in',
      'This page opens when an application (for example an MCP client) asks for access to your imagegen account. Start the connection from your application.',
    ),
  );
}

/** POST /oauth/signin — verifies CSRF and the API key, records the grant and finishes the interaction. */
export async function handleSigninSubmit(deps: SigninDeps, req: IncomingMessage, res: ServerResponse, form: Record<string, unknown>) {
  const interaction = await loadInteraction(deps.provider, req, res);
  if (!interaction) {
    return send(
      res,
      infoPage(400, 'Sign-in expired', 'This sign-in request expired or was already used. Go back to your application and connect again.'),
    );
  }
  const origin = req.headers.origin;
  const csrf = typeof form.csrf === 'string' ? form.csrf : '';
  // CSRF: the form token is an HMAC of the interaction id (which only the victim's httpOnly cookie holds);
  // cookies are SameSite=Lax and a foreign Origin is refused outright.
  const foreignOrigin = !!origin && origin !== 'null' && origin !== new URL(deps.urls.base).origin;
  if (foreignOrigin || !safeEqual(csrf, csrfFor(deps.csrfSecret, interaction.uid))) {
    return send(res, infoPage(403, 'Request refused', 'The form could not be verified. Reload the sign-in page and try again.'));
  }

  if (form.decision !== 'approve') {
    return deps.provider.interactionFinished(
      req,
      res,
      { error: 'access_denied', error_description: 'The tenant denied the authorization request' },
      { mergeWithLastSubmission: false },
    );
  }

  const scopesField = form.scope === undefined ? [] : Array.isArray(form.scope) ? form.scope : [form.scope];
  const requested = requestedScopes(interaction);
  const chosen = new Set(scopesField.map(String).filter((s) => requested.includes(s)));

  // Who is signing in: the tenant of the given key, else (consent only) the tenant of the browser session.
  const key = typeof form.api_key === 'string' ? form.api_key.trim() : '';
  let tenantId: string | undefined;
  if (key) {
    if (!API_KEY_PATTERN.test(key)) {
      return send(res, await renderForm(deps, interaction, { error: 'Invalid or missing API key', status: 401, checked: chosen }));
    }
    try {
      const auth = await deps.authenticateKey(createHash('sha256').update(key).digest('hex'));
      if (!auth.tenantActive) {
        return send(res, await renderForm(deps, interaction, { error: 'Tenant account is inactive', status: 403, checked: chosen }));
      }
      tenantId = auth.tenantId;
    } catch (err) {
      if (err instanceof AppError && err.status === 401) {
        return send(res, await renderForm(deps, interaction, { error: 'Invalid or missing API key', status: 401, checked: chosen }));
      }
      deps.logger.error({ err }, 'sign-in: key check failed');
      return send(
        res,
        await renderForm(deps, interaction, { error: 'Sign-in is unavailable right now, try again shortly', status: 503, checked: chosen }),
      );
    }
  } else if (interaction.session?.accountId && interaction.prompt?.name !== 'login') {
    const t = await deps.getTenant(interaction.session.accountId).catch(() => undefined);
    if (!t?.isActive) {
      return send(res, await renderForm(deps, interaction, { error: 'Tenant account is inactive', status: 403, checked: chosen }));
    }
    tenantId = t.tenantId;
  } else {
    return send(res, await renderForm(deps, interaction, { error: 'Invalid or missing API key', status: 401, checked: chosen }));
  }

  if (requested.length && chosen.size === 0) {
    return send(
      res,
      await renderForm(deps, interaction, { error: 'Choose at least one permission, or deny the request', status: 400, checked: chosen }),
    );
  }

  const { provider } = deps;
  const clientId = String(interaction.params.client_id);
  let grant = interaction.grantId ? await provider.Grant.find(interaction.grantId) : undefined;
  if (!grant || grant.accountId !== tenantId) grant = new provider.Grant({ accountId: tenantId, clientId });
  // Our scopes are both provider scopes (so clients may register them) and resource-server scopes (so
  // access tokens carry them): record every requested one as granted or rejected in both places.
  const all = [
    ...new Set(
      String(interaction.params.scope ?? '')
        .split(' ')
        .filter(Boolean),
    ),
  ];
  const granted = all.filter((s) => s === 'openid' || s === 'offline_access' || chosen.has(s));
  const rejected = requested.filter((s) => !chosen.has(s));
  if (granted.length) grant.addOIDCScope(granted.join(' '));
  if (rejected.length) grant.rejectOIDCScope(rejected.join(' '));
  const resources = interaction.params.resource === undefined ? [deps.urls.resource] : [interaction.params.resource].flat();
  for (const r of resources) {
    if (chosen.size) grant.addResourceScope(String(r), [...chosen].join(' '));
    if (rejected.length) grant.rejectResourceScope(String(r), rejected.join(' '));
  }
  const grantId = await grant.save();

  // Signing in with another tenant's key replaces the browser session (instead of oidc-provider's logout prompt).
  if (interaction.session?.accountId && interaction.session.accountId !== tenantId) {
    const sessionUid = interaction.session.uid;
    interaction.session = undefined;
    await interaction.save(Math.max(1, interaction.exp - Math.floor(Date.now() / 1000)));
    const session = sessionUid ? await provider.Session.findByUid(sessionUid) : undefined;
    await session?.destroy();
  }

  deps.logger.info({ tenantId, clientId, scopes: [...chosen] }, 'oauth authorization approved');
  return provider.interactionFinished(
    req,
    res,
    { login: { accountId: tenantId, remember: false }, consent: { grantId } },
    { mergeWithLastSubmission: false },
  );
}
