-- Webhook endpoints of a tenant (several per tenant).
CREATE TABLE endpoints (
  id bigserial PRIMARY KEY,
  tenant_id text NOT NULL,
  url text NOT NULL,
  description text,
  events text[] NOT NULL,
  secret text NOT NULL, -- 'enc:v1:...' (AES-256-GCM under a key derived from CREDENTIALS_KEY) or 'plain:...'
  secret_hint text NOT NULL,
  enabled boolean NOT NULL DEFAULT true,
  disabled_reason text, -- consecutive_failures | user
  consecutive_failures int NOT NULL DEFAULT 0,
  last_delivery_status text, -- success | failed
  last_response_status int,
  last_delivery_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX endpoints_tenant ON endpoints (tenant_id, id);

-- One message to one endpoint; retried until it succeeds, runs out of attempts, or the endpoint goes.
CREATE TABLE deliveries (
  id uuid PRIMARY KEY, -- also the webhook-id header
  endpoint_id bigint NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  tenant_id text NOT NULL,
  event text NOT NULL,
  source_event_id text, -- the QuotaCrossed event id (one delivery per endpoint and event)
  payload text NOT NULL, -- the exact JSON body, identical on every attempt
  status text NOT NULL DEFAULT 'pending', -- pending | succeeded | failed
  attempt_count int NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  locked_until timestamptz, -- lease of the dispatcher replica attempting it
  last_response_status int,
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz,
  UNIQUE (endpoint_id, source_event_id)
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, created_at DESC);

CREATE TABLE delivery_attempts (
  id bigserial PRIMARY KEY,
  delivery_id uuid NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
  attempt int NOT NULL,
  response_status int,
  error text,
  duration_ms int NOT NULL,
  attempted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX delivery_attempts_delivery ON delivery_attempts (delivery_id, attempt);
