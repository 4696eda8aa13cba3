import type { GenerateImagesRequest } from '@imagegen/contracts/generation/v1/generation';
import type { Principal } from '@imagegen/platform';
import type { ModelInfo } from './models.js';
import type { InputImage } from './providers/types.js';
import type { GeneratePlan } from './validate.js';

/**
 * The compose step: turns the validated request plus any saved assets (characters, products, style
 * presets, reference groups, reference images) into what is sent upstream. This version has no saved
 * assets: every asset field is refused with a clear 400 detail. The saved-assets work replaces
 * `noAssetsComposer` with one that calls AssetsService.ResolveGenerationAssets (docs/design/generation.md).
 */
export interface Composition {
  /** Final prompt (style preset prefix, characters/products and the user prompt). */
  prompt: string;
  negativePrompt?: string;
  systemInstruction?: string;
  /** Ratio supplied by a scene, style preset or character (in that order), used when the request has none. */
  aspectRatio?: string;
  referenceImages: InputImage[];
  stylePresetId?: number;
  productReferenceId?: number;
  characterId?: number;
  referenceGroupIds: number[];
  /** Called after success (e.g. MarkAssetsUsed). */
  afterSuccess?: () => Promise<void>;
}

export interface ComposeInput {
  req: GenerateImagesRequest;
  plan: GeneratePlan;
  principal: Principal;
}

export interface Composer {
  /** Checks of the asset fields that need no lookup (one detail per problem), run with validation. */
  check(req: GenerateImagesRequest, model: ModelInfo | undefined): string[];
  compose(input: ComposeInput): Promise<Composition>;
}

/** Asset fields of POST /api/images: proto field -> API name. */
export const ASSET_FIELDS: [keyof GenerateImagesRequest, string][] = [
  ['characterId', 'character_id'],
  ['characterIds', 'character_ids'],
  ['productId', 'product_id'],
  ['productIds', 'product_ids'],
  ['stylePresetId', 'style_preset_id'],
  ['stylePresetName', 'style_preset_name'],
  ['referenceGroupId', 'reference_group_id'],
  ['referenceGroupIds', 'reference_group_ids'],
  ['referenceGroupName', 'reference_group_name'],
  ['referenceMode', 'reference_mode'],
  ['referenceImages', 'reference_images'],
];

export const noAssetsComposer: Composer = {
  check(req) {
    return ASSET_FIELDS.filter(([k]) => req[k] !== undefined && req[k] !== null).map(
      ([, name]) =>
        `${name} is not supported yet: saved characters, products, style presets, reference groups and reference images are not available in this version`,
    );
  },
  async compose({ plan }) {
    return {
      prompt: plan.prompt,
      negativePrompt: plan.negativePrompt,
      systemInstruction: plan.systemInstruction,
      referenceImages: [],
      referenceGroupIds: [],
    };
  },
};
