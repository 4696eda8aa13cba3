-- Content Credentials (issue 39): a tenant may have its prompts written into its images' signed manifests
-- (left out by default: a prompt can be private). Expand only: a column with a default.
ALTER TABLE tenants ADD COLUMN IF NOT EXISTS credentials_include_prompt boolean NOT NULL DEFAULT false;
