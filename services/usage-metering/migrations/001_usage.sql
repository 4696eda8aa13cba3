-- Monthly usage per tenant (UTC month of the event's occurred_at). Counters only grow with stored
-- images and finished executions: deletes are recorded in deleted_* and never reduce total_bytes,
-- which is what the monthly quota is checked against (see docs/README-usage.md).
CREATE TABLE usage_months (
  tenant_id text NOT NULL,
  month text NOT NULL, -- YYYY-MM
  total_operations bigint NOT NULL DEFAULT 0,
  failed_operations bigint NOT NULL DEFAULT 0,
  total_images bigint NOT NULL DEFAULT 0,
  total_bytes bigint NOT NULL DEFAULT 0,
  duration_ms_sum bigint NOT NULL DEFAULT 0,
  duration_count bigint NOT NULL DEFAULT 0,
  deleted_images bigint NOT NULL DEFAULT 0,
  deleted_bytes bigint NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, month)
);
CREATE INDEX usage_months_month ON usage_months (month);

-- Hourly buckets: the rolling 30 days and the platform's last 24 hours.
CREATE TABLE usage_hours (
  tenant_id text NOT NULL,
  hour timestamptz NOT NULL,
  operations bigint NOT NULL DEFAULT 0,
  images bigint NOT NULL DEFAULT 0,
  bytes bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant_id, hour)
);
CREATE INDEX usage_hours_hour ON usage_hours (hour);

-- One row per (tenant, billing period, threshold): inserted in the same transaction as the usage
-- update that reached the threshold, together with the QuotaCrossed outbox event.
CREATE TABLE quota_alerts (
  tenant_id text NOT NULL,
  billing_period text NOT NULL, -- YYYY-MM
  threshold int NOT NULL,
  usage_bytes bigint NOT NULL,
  quota_mb bigint NOT NULL,
  event_id uuid NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, billing_period, threshold)
);
