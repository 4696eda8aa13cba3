/**
 * Content Credentials (C2PA, issue 39): the interface through which every image the library stores from a provider
 * is signed, like ObjectStorage for the files. storeImage (images/store-image.ts) is the one place provider output
 * reaches storage (generate, edit and the asset generations through StoreImage), and it calls `sign` for every
 * operation that is not an import (IMPORTED_OPERATIONS): a new operation is signed unless it is declared an import.
 * Two implementations: C2paCredentials (c2pa-node, c2pa.ts) and NoCredentials (signing off or not configured).
 */

/** Operations whose bytes come from outside (a tenant's upload, a scene's fetched reference): kept as they came. */
export const IMPORTED_OPERATIONS: ReadonlySet<string> = new Set(['upload', 'scene-reference']);

export const TRAINED_ALGORITHMIC_MEDIA = 'http://cv.iptc.org/newscodes/digitalsourcetype/trainedAlgorithmicMedia';

/** An ingredient's bytes: the parent of an edit, or a reference image sent upstream. */
export interface IngredientAsset {
  data: Buffer;
  mimeType: string;
  title: string;
}

export interface SignRequest {
  data: Buffer;
  mimeType: string;
  /** What the platform did: a new image (generate and the asset generations) or an edit of `parent`. */
  operation: string;
  modelId: string;
  /** Only when the tenant includes prompts in its credentials (off by default: a prompt can be private). */
  prompt?: string;
  /** The edited image (its own manifest included, so the chain validates): the parentOf ingredient. */
  parent?: IngredientAsset;
  /** Reference images (characters, products, scene references): componentOf ingredients. */
  references?: IngredientAsset[];
}

/** What a stored file's credentials say, recorded at store time (images.credentials_*) so a GET parses nothing. */
export interface CredentialsSummary {
  present: boolean;
  /** c2pa-rs's validation_state: Trusted, Valid or Invalid; null when there is no manifest. */
  validationState: string | null;
  /** The signer's organization (the signing certificate's issuer as C2PA reports it); null when none. */
  issuer: string | null;
}

export interface CredentialsReport extends CredentialsSummary {
  /** The whole manifest store (c2pa-rs's JSON, validated against the configured trust anchors); null when none. */
  manifestStore: Record<string, unknown> | null;
}

export interface ContentCredentials {
  /** False when signing is off or not configured: `sign` then returns the bytes unchanged. */
  readonly signing: boolean;
  /** Signs `data`, answering the signed bytes and what their credentials say. */
  sign(req: SignRequest): Promise<{ data: Buffer; summary: CredentialsSummary }>;
  /** Reads and validates the manifest store of a file (against the configured trust anchors). */
  read(data: Buffer, mimeType: string): Promise<CredentialsReport>;
}

export const NO_CREDENTIALS: CredentialsSummary = Object.freeze({ present: false, validationState: null, issuer: null });
