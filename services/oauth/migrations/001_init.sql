-- Storage of the oidc-provider models (clients, grants, sessions, interactions, codes, tokens).
-- One row per model instance; `type` is the oidc-provider model name (AccessToken, RefreshToken, ...).
CREATE TABLE IF NOT EXISTS oidc_payloads (
  id text NOT NULL,
  type text NOT NULL,
  payload jsonb NOT NULL,
  grant_id text,
  user_code text,
  uid text,
  expires_at timestamptz,
  consumed_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (type, id)
);
CREATE INDEX IF NOT EXISTS oidc_payloads_grant_id ON oidc_payloads (grant_id) WHERE grant_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS oidc_payloads_uid ON oidc_payloads (uid) WHERE uid IS NOT NULL;
CREATE INDEX IF NOT EXISTS oidc_payloads_user_code ON oidc_payloads (user_code) WHERE user_code IS NOT NULL;
CREATE INDEX IF NOT EXISTS oidc_payloads_expires_at ON oidc_payloads (expires_at) WHERE expires_at IS NOT NULL;

-- Secrets generated on first start and shared by every replica: the signing JWKS, the cookie
-- signing keys and the CSRF secret of the sign-in page.
CREATE TABLE IF NOT EXISTS secrets (
  name text PRIMARY KEY,
  value jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
