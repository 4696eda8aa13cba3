import type { OutputFormat } from '@imagegen/api-schemas/vocab';
import type { ModelInfo } from './models.js';

/**
 * A request that passed every rule of SPEC 4.1, normalized: what validation (validate.ts) makes, and what the
 * composer (compose.ts) and the pipeline take. In a module of its own so that validation, which runs the
 * composer's checks, and the composer do not import each other.
 */
export interface GeneratePlan {
  model: ModelInfo;
  /** Content Credentials (issue 39): the tenant has its prompts written into the signed manifests. */
  credentialsIncludePrompt?: boolean;
  prompt: string;
  negativePrompt?: string;
  /** Canonical ratio from the request (aliases resolved); undefined when not given. */
  aspectRatio?: string;
  n: number;
  /** provA tier ('0.5k'...'4k'); undefined = model default. */
  tier?: string;
  search: boolean;
  thinking: boolean;
  /** provB */
  size?: string;
  outputFormat: OutputFormat;
  quality?: string;
  outputCompression?: number;
  background?: string;
  moderation?: string;
  systemInstruction?: string;
  /** From session_id or X-Session-Id; undefined = generate one. */
  sessionId?: string;
  imageToEditId?: number;
}
