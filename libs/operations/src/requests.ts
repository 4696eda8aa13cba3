import { CharacterUpdateInput } from '@imagegen/api-schemas';
import type { EditImageRequest, GenerateImagesRequest, UploadForEditingRequest } from '@imagegen/contracts/generation/v1/generation';
import type { CreateCharacterRequest, UpdateCharacterRequest } from '@imagegen/contracts/library/v1/assets';
import type { ListImagesRequest } from '@imagegen/contracts/library/v1/library';

/**
 * From a request body (REST) or a tool's arguments (MCP) to the gRPC request of its operation, written once for both.
 * The REST routes validate JSON types only where the service reports every rule itself (null counts as absent);
 * the MCP tools' arguments are checked by zod, so the same mapping serves both.
 */

type Body = Record<string, unknown>;

const INT32_MAX = 2_147_483_647;
const INT32_MIN = -2_147_483_648;

/** null and undefined are both "not given". */
const given = <T>(x: unknown): T | undefined => (x === null || x === undefined ? undefined : (x as T));
const list = <T>(x: unknown): { values: T[] } | undefined => (Array.isArray(x) ? { values: x as T[] } : undefined);
/** An int32 field clamped to the int32 range (still outside every rule), so it can be encoded and the service reports it. */
const int32 = (x: unknown): number | undefined => {
  const n = given<number>(x);
  return n === undefined ? undefined : Math.min(INT32_MAX, Math.max(INT32_MIN, n));
};
const blank = (x: unknown): string | undefined => (x === undefined || x === null || x === '' ? undefined : (x as string));

/** POST /api/images and generate_image. */
export function generateImagesRequest(b: Body): GenerateImagesRequest {
  return {
    prompt: given(b.prompt),
    negativePrompt: given(b.negative_prompt),
    aspectRatio: given(b.aspect_ratio),
    n: int32(b.n),
    modelId: given(b.model_id),
    resolutionTier: given(b.resolution_tier),
    useProvaSearch: given(b.use_provA_search),
    enableThinking: given(b.enable_thinking),
    size: given(b.size),
    outputFormat: given(b.output_format),
    quality: given(b.quality),
    outputCompression: int32(b.output_compression),
    background: given(b.background),
    moderation: given(b.moderation),
    systemInstruction: given(b.system_instruction),
    stylePresetId: given(b.style_preset_id),
    stylePresetName: given(b.style_preset_name),
    referenceImages: list<string>(b.reference_images),
    referenceGroupId: given(b.reference_group_id),
    referenceGroupIds: list<number>(b.reference_group_ids),
    referenceGroupName: given(b.reference_group_name),
    referenceMode: given(b.reference_mode),
    sessionId: given(b.session_id),
    characterId: given(b.character_id),
    characterIds: list<number>(b.character_ids),
    productId: given(b.product_id),
    productIds: list<number>(b.product_ids),
    imageToEditId: given(b.image_to_edit_id),
  };
}

/** POST /api/edit-image and edit_image. */
export function editImageRequest(b: Body): EditImageRequest {
  return {
    imageId: given(b.image_id),
    prompt: given(b.prompt),
    negativePrompt: given(b.negative_prompt),
    aspectRatio: given(b.aspect_ratio),
    modelId: given(b.model_id),
    sessionId: given(b.session_id),
  };
}

/** POST /api/upload-for-editing and upload_image_for_editing. */
export function uploadForEditingRequest(b: Body): UploadForEditingRequest {
  return {
    imageUrl: given(b.image_url),
    fileName: given(b.file_name),
    mimeType: given(b.mime_type),
    sessionId: given(b.session_id),
  };
}

/**
 * GET /api/images (its query, camelCase) and list_images (its arguments, the same names in snake_case): the
 * library's request; resolutionTier is a comma-separated list. `asJson`: the page comes back rendered (REST sends it on as is).
 */
export function listImagesRequest(query: Body, asJson = false): ListImagesRequest {
  const q = camelKeys(query);
  const tiers = blank(q.resolutionTier);
  return {
    limit: given<number>(q.limit) ?? 0,
    offset: given<number>(q.offset) ?? 0,
    search: blank(q.search),
    searchMode: blank(q.searchMode),
    dateFrom: blank(q.dateFrom),
    dateTo: blank(q.dateTo),
    aspectRatio: blank(q.aspectRatio),
    operationType: blank(q.operationType),
    minSize: given(q.minSize),
    maxSize: given(q.maxSize),
    sessionId: blank(q.sessionId),
    hasNegativePrompt: given(q.hasNegativePrompt),
    modelId: blank(q.modelId),
    resolutionTiers: tiers
      ? tiers
          .split(',')
          .map((t) => t.trim().toLowerCase())
          .filter(Boolean)
      : [],
    stylePresetId: given(q.stylePresetId),
    productReferenceId: given(q.productReferenceId),
    isReference: given(q.isReference),
    cursor: blank(q.cursor),
    asJson,
  };
}

/** The fields a character update may name (PATCH semantics). */
const CHARACTER_FIELDS = Object.keys(CharacterUpdateInput.shape);

function characterFields(b: Body) {
  return {
    characterName: given<string>(b.character_name) ?? '',
    basePrompt: given<string>(b.base_prompt) ?? '',
    description: given<string>(b.description),
    negativePrompt: given<string>(b.negative_prompt),
    systemInstruction: given<string>(b.system_instruction),
    preferredAspectRatio: given<string>(b.preferred_aspect_ratio),
    referenceImageIds: given<number[]>(b.reference_image_ids) ?? [],
    tags: given<string[]>(b.tags) ?? [],
  };
}

/** POST /api/characters and create_character. */
export function createCharacterRequest(b: Body): CreateCharacterRequest {
  return characterFields(b);
}

/**
 * PATCH /api/characters/:identifier and update_character: only the fields given change (null clears a field, so
 * it travels as absent and is named in presentFields); reference_image_ids and tags replace.
 */
export function updateCharacterRequest(identifier: string, b: Body): UpdateCharacterRequest {
  const fields = characterFields(b);
  return {
    identifier,
    presentFields: CHARACTER_FIELDS.filter((k) => b[k] !== undefined),
    ...fields,
    // absent stays absent here: only presentFields change
    characterName: given(b.character_name),
    basePrompt: given(b.base_prompt),
  };
}

/** snake_case keys to camelCase (an MCP tool's arguments to the REST query's names). */
function camelKeys(o: Body): Body {
  const out: Body = {};
  for (const [k, v] of Object.entries(o)) out[k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())] = v;
  return out;
}
