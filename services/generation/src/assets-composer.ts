/**
 * The saved-assets composer: generation's `Composer` (compose.ts) backed by the library's AssetsService over gRPC.
 * It applies SPEC 4.1 rules 1, 2, 4 and 5 and supplies the asset default of rule 3:
 *   check():   singular + array forms refused together; 1-5 characters, 1-6 products, 1-5 reference groups;
 *              reference_mode style|add; request reference_images within the model's total.
 *   compose(): AssetsService.ResolveGenerationAssets -> final prompt
 *                [style preset prompt] [scene prompt] [characters/products block] [user prompt] [reference-mode sentence]
 *              ("\n\n"-joined); negative prompt and system instruction from the request, else the assets';
 *              aspect ratio default scene > style preset > character; reference images (characters', products',
 *              the scene's / groups', then the request's storage keys) loaded through LibraryService.GetObjectData;
 *              total refused above 14 (provA) / 16 (provB); the ids to record; MarkAssetsUsed after success.
 */
import {
  CHARACTERS_PER_REQUEST_MAX,
  PRODUCTS_PER_REQUEST_MAX,
  type Provider,
  REFERENCE_GROUPS_PER_REQUEST_MAX,
  REFERENCE_IMAGES_MAX,
  REFERENCE_MODES,
} from '@imagegen/api-schemas/vocab';
import type { GenerateImagesRequest } from '@imagegen/contracts/generation/v1/generation';
import { AssetsServiceService, type ResolveGenerationAssetsResponse } from '@imagegen/contracts/library/v1/assets';
import { LibraryServiceService } from '@imagegen/contracts/library/v1/library';
import { createClient, invalidPayload, type Principal, type ServiceContext } from '@imagegen/platform';
import { aliasedRatio } from './models.js';

/** The parts of generation's types this composer relies on (structural, so no import from generation). */
interface ModelLike {
  provider: Provider;
}
interface PlanLike {
  model: ModelLike;
  prompt: string;
  negativePrompt?: string;
  systemInstruction?: string;
}
export interface ComposedAssets {
  prompt: string;
  negativePrompt?: string;
  systemInstruction?: string;
  aspectRatio?: string;
  referenceImages: { data: Buffer; mimeType: string }[];
  referenceObjectKeys: string[];
  stylePresetId?: number;
  productReferenceId?: number;
  characterId?: number;
  referenceGroupIds: number[];
  afterSuccess?: () => Promise<void>;
}

const present = <T>(v: T | undefined | null): v is T => v !== undefined && v !== null;

function idsOf(single: number | undefined, list: { values: number[] } | undefined): number[] {
  if (present(list)) return list.values;
  return present(single) ? [single] : [];
}

/** True when the request uses any saved asset or reference image. */
export function usesAssets(req: GenerateImagesRequest): boolean {
  return [
    req.characterId,
    req.characterIds,
    req.productId,
    req.productIds,
    req.stylePresetId,
    req.stylePresetName,
    req.referenceGroupId,
    req.referenceGroupIds,
    req.referenceGroupName,
    req.referenceImages,
  ].some(present);
}

/** The checks that need no lookup (one detail per problem), run with generation's validation. */
export function checkAssetFields(req: GenerateImagesRequest, model: ModelLike | undefined): string[] {
  const d: string[] = [];
  if (present(req.characterId) && present(req.characterIds)) d.push('character_id and character_ids cannot be combined');
  if (present(req.productId) && present(req.productIds)) d.push('product_id and product_ids cannot be combined');
  if (present(req.referenceGroupId) && present(req.referenceGroupIds))
    d.push('reference_group_id and reference_group_ids cannot be combined');
  const list = (name: string, l: { values: number[] } | undefined, max: number) => {
    if (!present(l)) return;
    if (l.values.length < 1 || l.values.length > max) d.push(`${name} must have between 1 and ${max} items`);
    if (l.values.some((v) => !Number.isSafeInteger(v) || v < 1)) d.push(`${name} must contain positive integers`);
  };
  list('character_ids', req.characterIds, CHARACTERS_PER_REQUEST_MAX);
  list('product_ids', req.productIds, PRODUCTS_PER_REQUEST_MAX);
  list('reference_group_ids', req.referenceGroupIds, REFERENCE_GROUPS_PER_REQUEST_MAX);
  for (const [name, v] of [
    ['character_id', req.characterId],
    ['product_id', req.productId],
    ['style_preset_id', req.stylePresetId],
    ['reference_group_id', req.referenceGroupId],
  ] as const) {
    if (present(v) && (!Number.isSafeInteger(v) || v < 1)) d.push(`${name} must be a positive integer`);
  }
  if (present(req.referenceMode) && !(REFERENCE_MODES as readonly string[]).includes(req.referenceMode)) {
    d.push(`reference_mode must be one of: ${REFERENCE_MODES.join(', ')}`);
  }
  if (present(req.referenceImages)) {
    if (req.referenceImages.values.some((k) => typeof k !== 'string' || k.trim() === ''))
      d.push('reference_images must contain storage keys');
    const max = model ? REFERENCE_IMAGES_MAX[model.provider] : REFERENCE_IMAGES_MAX.provB;
    if (req.referenceImages.values.length > max) {
      d.push(`at most ${max} reference images in total${model ? ` for ${model.provider} models` : ''}`);
    }
  }
  return d;
}

export function createAssetsComposer(ctx: Pick<ServiceContext, 'resolve'>) {
  const assets = createClient(AssetsServiceService, () => ctx.resolve('library'));
  const library = createClient(LibraryServiceService, () => ctx.resolve('library'));

  async function load(keys: string[], principal: Principal) {
    return Promise.all(
      keys.map(async (objectKey) => {
        const o = await library.getObjectData({ objectKey }, principal);
        return { data: Buffer.from(o.data), mimeType: o.mimeType || 'image/png' };
      }),
    );
  }

  return {
    check: checkAssetFields,

    async compose({ req, plan, principal }: { req: GenerateImagesRequest; plan: PlanLike; principal: Principal }): Promise<ComposedAssets> {
      const requestKeys = req.referenceImages?.values ?? [];
      if (!usesAssets(req)) {
        return {
          prompt: plan.prompt,
          negativePrompt: plan.negativePrompt,
          systemInstruction: plan.systemInstruction,
          referenceImages: [],
          referenceObjectKeys: [],
          referenceGroupIds: [],
        };
      }
      const groupIds = idsOf(req.referenceGroupId, req.referenceGroupIds);
      const r: ResolveGenerationAssetsResponse = await assets.resolveGenerationAssets(
        {
          characterIds: idsOf(req.characterId, req.characterIds),
          productIds: idsOf(req.productId, req.productIds),
          stylePresetId: req.stylePresetId,
          stylePresetName: req.stylePresetId === undefined ? req.stylePresetName : undefined,
          referenceGroupIds: groupIds,
          referenceGroupName: req.referenceGroupName,
          referenceMode: req.referenceMode,
          prompt: plan.prompt,
        },
        principal,
      );
      const keys = [...r.referenceObjectKeys, ...requestKeys.filter((k) => !r.referenceObjectKeys.includes(k))];
      const max = REFERENCE_IMAGES_MAX[plan.model.provider];
      if (keys.length > max) {
        throw invalidPayload([
          `at most ${max} reference images in total for ${plan.model.provider} models (this request uses ${keys.length})`,
        ]);
      }
      const referenceImages = await load(keys, principal);
      const ratio = r.aspectRatioDefault?.trim().toLowerCase();
      return {
        prompt: r.finalPrompt ?? plan.prompt,
        // SPEC 4.1 rule 4: any request value overrides an asset default.
        negativePrompt: plan.negativePrompt ?? r.negativePrompt,
        systemInstruction: plan.systemInstruction ?? r.systemInstruction,
        aspectRatio: ratio ? (aliasedRatio(ratio) ?? ratio) : undefined,
        referenceImages,
        referenceObjectKeys: keys,
        stylePresetId: r.stylePresetId,
        productReferenceId: r.productReferenceId,
        characterId: r.characterIds[0],
        referenceGroupIds: r.referenceGroupIds,
        afterSuccess: async () => {
          await assets.markAssetsUsed(
            { characterIds: r.characterIds, productIds: r.productIds, stylePresetId: r.stylePresetId, sceneIds: r.referenceGroupIds },
            principal,
          );
        },
      };
    },

    close() {
      assets.close();
      library.close();
    },
  };
}
