-- Tenants, API keys and provider credentials.
CREATE TABLE tenants (
  tenant_id text PRIMARY KEY,
  tenant_name text NOT NULL,
  is_active boolean NOT NULL DEFAULT true,
  contact_email text NOT NULL,
  monthly_quota_mb integer NOT NULL DEFAULT 10240,
  rate_limit_per_minute integer NOT NULL DEFAULT 60,
  notes text,
  model_id text NOT NULL DEFAULT 'provA-flash-lite-image',
  allowed_models text[] NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Only the sha256 of a key is stored; key_prefix/key_suffix build the abbreviated form.
CREATE TABLE api_keys (
  key_id text PRIMARY KEY,
  tenant_id text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
  key_hash text NOT NULL UNIQUE,
  key_prefix text NOT NULL,
  key_suffix text NOT NULL,
  key_name text NOT NULL,
  type text NOT NULL CHECK (type IN ('live', 'test')),
  is_active boolean NOT NULL DEFAULT true,
  usage_count bigint NOT NULL DEFAULT 0,
  last_used_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_at);
-- Names identify keys (revocation by name), so they are unique among a tenant's active keys.
CREATE UNIQUE INDEX api_keys_active_name ON api_keys (tenant_id, key_name) WHERE is_active;

-- One row per provider pool: the JSON array of keys, AES-256-GCM encrypted (iv || tag || ciphertext),
-- with "tenant_id:provider" as associated data so a row cannot be moved to another tenant.
CREATE TABLE provider_credentials (
  tenant_id text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
  provider text NOT NULL CHECK (provider IN ('provA', 'provB')),
  encrypted bytea NOT NULL,
  key_count integer NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, provider)
);

-- Administration: users, sessions, invitations.
CREATE TABLE admin_users (
  user_id text PRIMARY KEY,
  email text NOT NULL,
  display_name text NOT NULL,
  role text NOT NULL CHECK (role IN ('admin', 'super_admin')),
  is_active boolean NOT NULL DEFAULT true,
  password_hash text NOT NULL,
  failed_login_attempts integer NOT NULL DEFAULT 0,
  locked_until timestamptz,
  last_login_at timestamptz,
  tenant_id text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX admin_users_email ON admin_users (lower(email));

-- Opaque bearer tokens; only their sha256 is stored.
CREATE TABLE admin_sessions (
  session_id text PRIMARY KEY,
  token_hash text NOT NULL UNIQUE,
  user_id text NOT NULL REFERENCES admin_users (user_id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz,
  last_seen_at timestamptz,
  ip text,
  user_agent text
);
CREATE INDEX admin_sessions_user ON admin_sessions (user_id) WHERE revoked_at IS NULL;

CREATE TABLE invitations (
  token text PRIMARY KEY,
  email text NOT NULL,
  role text NOT NULL CHECK (role IN ('admin', 'super_admin')),
  tenant_id text,
  invited_by text,
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  accepted_at timestamptz,
  accepted_user_id text,
  revoked_at timestamptz
);
CREATE INDEX invitations_created ON invitations (created_at DESC);
