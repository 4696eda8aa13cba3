import type { GenerateImagesRequest } from '@imagegen/contracts/generation/v1/generation';
import type { Principal } from '@imagegen/platform';
import type { ModelInfo } from './models.js';
import type { GeneratePlan } from './plan.js';
import type { InputImage } from './providers/types.js';

/**
 * The compose step: turns the validated request plus any saved assets (characters, products, style
 * presets, reference groups, reference images) into what is sent upstream. The implementation is
 * createAssetsComposer (assets-composer.ts), which calls AssetsService.ResolveGenerationAssets
 * (docs/design/generation.md).
 */
export interface Composition {
  /** Final prompt (style preset prefix, characters/products and the user prompt). */
  prompt: string;
  negativePrompt?: string;
  systemInstruction?: string;
  /** Ratio supplied by a scene, style preset or character (in that order), used when the request has none. */
  aspectRatio?: string;
  referenceImages: InputImage[];
  /** The storage keys the reference images were loaded from: their Content Credentials ingredients (issue 39). */
  referenceObjectKeys?: string[];
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
