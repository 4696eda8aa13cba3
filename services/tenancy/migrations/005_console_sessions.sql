-- Web console sessions (issue 38): the gateway's backend-for-frontend signs a tenant in with an API key and keeps
-- this opaque session in an HttpOnly cookie. Only the token's sha256 is stored. A session lives while its key is
-- active and its tenant is active (checked on every request), until it expires or is ended (sign-out).
CREATE TABLE console_sessions (
  session_id text PRIMARY KEY,
  token_hash text NOT NULL UNIQUE,
  tenant_id text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
  key_id text NOT NULL REFERENCES api_keys (key_id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  ended_at timestamptz,
  ip text,
  user_agent text
);
CREATE INDEX console_sessions_key ON console_sessions (key_id) WHERE ended_at IS NULL;
