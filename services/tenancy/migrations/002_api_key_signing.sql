-- Signed requests (SPEC 5.8, extension; issue 37), opt-in per API key. The signing secrets are AES-256-GCM
-- encrypted with CREDENTIALS_KEY (iv || tag || ciphertext, as provider credentials), with
-- "<tenant_id>:<key_id>:signing" as associated data so a blob cannot be moved to another key. A rotated secret is
-- kept as the previous one until previous_signing_secret_expires_at (the grace period), then ignored.
ALTER TABLE api_keys
  ADD COLUMN signature_required boolean NOT NULL DEFAULT false,
  ADD COLUMN signing_secret bytea,
  ADD COLUMN signing_secret_created_at timestamptz,
  ADD COLUMN previous_signing_secret bytea,
  ADD COLUMN previous_signing_secret_expires_at timestamptz,
  ADD CONSTRAINT api_keys_signing_secret CHECK (NOT signature_required OR signing_secret IS NOT NULL);
