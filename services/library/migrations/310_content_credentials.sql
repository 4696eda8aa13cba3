-- Content Credentials (issue 39): what a stored file's C2PA manifest said when it was stored (signed by the platform
-- for provider output, read from the bytes for imports), so GET /api/images/:id answers without parsing the file.
-- credentials_state: c2pa's validation_state (Trusted, Valid, Invalid) or NULL when the file carries no manifest;
-- credentials_issuer: the signer's organization. Nullable, no default: the previous version's INSERTs still run, and
-- its rows read as "no manifest recorded".
ALTER TABLE images ADD COLUMN IF NOT EXISTS credentials_state text, ADD COLUMN IF NOT EXISTS credentials_issuer text;
ALTER TABLE pending_images ADD COLUMN IF NOT EXISTS credentials_state text, ADD COLUMN IF NOT EXISTS credentials_issuer text;
