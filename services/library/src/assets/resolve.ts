import { CHARACTERS_PER_REQUEST_MAX, PRODUCTS_PER_REQUEST_MAX, REFERENCE_GROUPS_PER_REQUEST_MAX } from '@imagegen/api-schemas/vocab';
import type {
  MarkAssetsUsedRequest,
  MarkAssetsUsedResponse,
  ResolvedCharacter,
  ResolvedProduct,
  ResolveGenerationAssetsRequest,
  ResolveGenerationAssetsResponse,
} from '@imagegen/contracts/library/v1/assets';
import { type CallContext, invalidPayload, notFound, type Sql } from '@imagegen/platform';
import { type CharacterRow, characterFromDb, characterNotFound } from './characters.js';
import { idArray, REFERENCE_MODES, tenantOf } from './common.js';
import { findImages, orderedRefs } from './images.js';
import { type ProductRow, productFromDb, productNotFound } from './products.js';
import { type SceneRow, sceneFromDb, sceneNotFound } from './scenes.js';
import { findStylePreset, type StylePresetRow, stylePresetFromDb, stylePresetNotFound } from './style-presets.js';

/** The sentence added for the scene / reference-group images, by reference mode (style or add). */
export const REFERENCE_MODE_INSTRUCTIONS: Record<string, string> = {
  style: 'Use the scene reference images as a style reference only (palette, lighting, mood and composition); do not copy their subjects.',
  add: 'Include the people, objects and elements shown in the scene reference images in this image.',
};

const nonEmpty = (s: string | null | undefined): s is string => typeof s === 'string' && s.trim().length > 0;

/**
 * The character/product block of the final prompt (SPEC 4.1 rule 5). One character:
 *   Character "<name>": <base_prompt>
 * Several:
 *   Characters in this scene:
 *   1. <name>: <base_prompt>
 * Products (one line each):
 *   Product "<name>": <description>. Show this product exactly as it appears in its reference image.
 */
export function characterAndProductPrompt(characters: CharacterRow[], products: ProductRow[]): string {
  const parts: string[] = [];
  if (characters.length === 1) {
    parts.push(`Character "${characters[0].characterName}": ${characters[0].basePrompt}`);
  } else if (characters.length > 1) {
    parts.push(['Characters in this scene:', ...characters.map((c, i) => `${i + 1}. ${c.characterName}: ${c.basePrompt}`)].join('\n'));
  }
  for (const p of products) {
    const desc = nonEmpty(p.productDescription) ? `: ${p.productDescription.trim().replace(/\.$/, '')}` : '';
    parts.push(`Product "${p.productName}"${desc}. Show this product exactly as it appears in its reference image.`);
  }
  return parts.join('\n');
}

export function resolveHandlers(deps: { sql: Sql }) {
  const { sql } = deps;

  async function loadCharacters(tenantId: string, ids: number[]): Promise<CharacterRow[]> {
    if (ids.length === 0) return [];
    const rows = await sql`SELECT * FROM characters WHERE tenant_id = ${tenantId} AND id = ANY(${idArray(ids)}::bigint[])`;
    const byId = new Map(rows.map((r) => [Number(r.id), characterFromDb(r)]));
    return [...new Set(ids)].map((id) => {
      const c = byId.get(id);
      if (!c) throw characterNotFound();
      return c;
    });
  }

  async function loadProducts(tenantId: string, ids: number[]): Promise<ProductRow[]> {
    if (ids.length === 0) return [];
    const rows = await sql`SELECT * FROM products WHERE tenant_id = ${tenantId} AND id = ANY(${idArray(ids)}::bigint[])`;
    const byId = new Map(rows.map((r) => [Number(r.id), productFromDb(r)]));
    return [...new Set(ids)].map((id) => {
      const p = byId.get(id);
      if (!p) throw productNotFound();
      return p;
    });
  }

  /** Reference groups are scene presets: reference_group_ids are scene ids, reference_group_name a scene name. */
  async function loadGroups(tenantId: string, ids: number[], name: string | undefined): Promise<SceneRow[]> {
    const out: SceneRow[] = [];
    if (ids.length) {
      const rows = await sql`SELECT * FROM scenes WHERE tenant_id = ${tenantId} AND id = ANY(${idArray(ids)}::bigint[])`;
      const byId = new Map(rows.map((r) => [Number(r.id), sceneFromDb(r)]));
      for (const id of new Set(ids)) {
        const s = byId.get(id);
        if (!s) throw notFound(`Reference group ${id} not found for this tenant`);
        out.push(s);
      }
    }
    if (name !== undefined) {
      const [r] = await sql`SELECT * FROM scenes WHERE tenant_id = ${tenantId} AND scene_name = ${name}`;
      if (!r) throw notFound(`Reference group ${name} not found for this tenant`);
      const s = sceneFromDb(r);
      if (!out.some((o) => o.id === s.id)) out.push(s);
    }
    return out;
  }

  return {
    async resolveGenerationAssets(req: ResolveGenerationAssetsRequest, call: CallContext): Promise<ResolveGenerationAssetsResponse> {
      const tenantId = tenantOf(call);
      const problems: string[] = [];
      // SPEC 4.1 rule 2 (the request-level caps; generation also checks them).
      if (req.characterIds.length > CHARACTERS_PER_REQUEST_MAX)
        problems.push(`character_ids must have at most ${CHARACTERS_PER_REQUEST_MAX} items`);
      if (req.productIds.length > PRODUCTS_PER_REQUEST_MAX)
        problems.push(`product_ids must have at most ${PRODUCTS_PER_REQUEST_MAX} items`);
      if (req.referenceGroupIds.length > REFERENCE_GROUPS_PER_REQUEST_MAX) {
        problems.push(`reference_group_ids must have at most ${REFERENCE_GROUPS_PER_REQUEST_MAX} items`);
      }
      if (nonEmpty(req.referenceMode) && !(REFERENCE_MODES as readonly string[]).includes(req.referenceMode)) {
        problems.push(`reference_mode must be one of: ${REFERENCE_MODES.join(', ')}`);
      }
      if (problems.length) throw invalidPayload(problems);

      const characters = await loadCharacters(tenantId, req.characterIds);
      const products = await loadProducts(tenantId, req.productIds);
      let style: StylePresetRow | undefined;
      if (req.stylePresetId !== undefined && req.stylePresetId !== 0) {
        // style_preset_id is an id only: no fallback to a preset whose name happens to be those digits.
        const [r] = await sql`SELECT * FROM style_presets WHERE tenant_id = ${tenantId} AND id = ${req.stylePresetId}`;
        if (!r) throw stylePresetNotFound();
        style = stylePresetFromDb(r);
      } else if (nonEmpty(req.stylePresetName)) {
        style = await findStylePreset(sql, tenantId, req.stylePresetName, { byName: true });
      }
      let scene: SceneRow | undefined;
      if (req.sceneId !== undefined && req.sceneId !== 0) {
        const [r] = await sql`SELECT * FROM scenes WHERE tenant_id = ${tenantId} AND id = ${req.sceneId}`;
        if (!r) throw sceneNotFound(req.sceneId);
        scene = sceneFromDb(r);
      } else if (nonEmpty(req.sceneName)) {
        // scene_name is a name only: a numeric name must not resolve another scene's id.
        const [r] = await sql`SELECT * FROM scenes WHERE tenant_id = ${tenantId} AND scene_name = ${req.sceneName}`;
        if (!r) throw sceneNotFound(req.sceneName);
        scene = sceneFromDb(r);
      }
      let groups = await loadGroups(tenantId, req.referenceGroupIds, nonEmpty(req.referenceGroupName) ? req.referenceGroupName : undefined);
      // A reference group is a scene preset: without an explicit scene, the first group is the scene in use
      // (its prompt prefix, its default aspect ratio and reference mode); the others add their images.
      if (!scene && groups.length > 0) scene = groups[0];
      groups = groups.filter((g) => g.id !== scene?.id);
      const images = await findImages(sql, tenantId, [
        ...characters.flatMap((c) => c.referenceImageIds),
        ...(scene?.referenceImageIds ?? []),
        ...groups.flatMap((g) => g.referenceImageIds),
      ]);
      const keys: string[] = [];
      const add = (k: string) => {
        if (!keys.includes(k)) keys.push(k);
      };
      const resolvedCharacters: ResolvedCharacter[] = characters.map((c) => {
        const refKeys = orderedRefs(c.referenceImageIds, images).map((i) => i.objectKey);
        refKeys.forEach(add);
        return {
          id: c.id,
          characterName: c.characterName,
          basePrompt: c.basePrompt,
          negativePrompt: c.negativePrompt ?? undefined,
          systemInstruction: c.systemInstruction ?? undefined,
          preferredAspectRatio: c.preferredAspectRatio ?? undefined,
          referenceObjectKeys: refKeys,
        };
      });
      const resolvedProducts: ResolvedProduct[] = products.map((p) => {
        add(p.objectKey);
        return { id: p.id, productName: p.productName, productDescription: p.productDescription ?? undefined, objectKey: p.objectKey };
      });
      const beforeScene = keys.length;
      if (scene) for (const i of orderedRefs(scene.referenceImageIds, images)) add(i.objectKey);
      for (const g of groups) for (const i of orderedRefs(g.referenceImageIds, images)) add(i.objectKey);
      const sceneReferenceCount = keys.length - beforeScene;

      const stylePrefix = nonEmpty(style?.prompt) ? style.prompt.trim() : undefined;
      const scenePrefix = nonEmpty(scene?.scenePrompt) ? scene.scenePrompt.trim() : undefined;
      const promptPrefix = [stylePrefix, scenePrefix].filter(nonEmpty).join('\n\n');
      const block = characterAndProductPrompt(characters, products);
      const negatives = [style?.negativePrompt, ...characters.map((c) => c.negativePrompt)].filter(nonEmpty).map((s) => s.trim());
      const systems = [style?.systemInstruction, ...characters.map((c) => c.systemInstruction)].filter(nonEmpty).map((s) => s.trim());
      const aspectScene = scene?.preferredAspectRatio ?? undefined;
      const aspectStyle = style?.aspectRatio ?? undefined;
      const aspectCharacter = characters.find((c) => nonEmpty(c.preferredAspectRatio))?.preferredAspectRatio ?? undefined;
      const referenceMode =
        (nonEmpty(req.referenceMode) ? req.referenceMode : undefined) ??
        scene?.defaultReferenceMode ??
        groups.find((g) => g.defaultReferenceMode)?.defaultReferenceMode ??
        undefined;
      const modeInstruction = sceneReferenceCount > 0 && referenceMode ? REFERENCE_MODE_INSTRUCTIONS[referenceMode] : undefined;
      const groupIds = [...(scene ? [scene.id] : []), ...groups.map((g) => g.id)];

      return {
        promptPrefix,
        characterAndProductPrompt: block,
        negativePrompt: negatives.length ? [...new Set(negatives)].join(', ') : undefined,
        systemInstruction: systems.length ? [...new Set(systems)].join('\n\n') : undefined,
        aspectRatioScene: aspectScene,
        aspectRatioStyle: aspectStyle,
        aspectRatioCharacter: aspectCharacter,
        referenceObjectKeys: keys,
        stylePresetId: style?.id,
        productReferenceId: products[0]?.id,
        referenceGroupIds: groupIds,
        stylePromptPrefix: stylePrefix,
        scenePromptPrefix: scenePrefix,
        sceneId: scene?.id,
        characterIds: characters.map((c) => c.id),
        productIds: products.map((p) => p.id),
        referenceMode,
        finalPrompt:
          req.prompt === undefined ? undefined : [promptPrefix, block, req.prompt, modeInstruction].filter(nonEmpty).join('\n\n'),
        characters: resolvedCharacters,
        products: resolvedProducts,
        aspectRatioDefault: aspectScene ?? aspectStyle ?? aspectCharacter,
        referenceModeInstruction: modeInstruction,
        sceneReferenceCount,
      };
    },

    async markAssetsUsed(req: MarkAssetsUsedRequest, call: CallContext): Promise<MarkAssetsUsedResponse> {
      const tenantId = tenantOf(call);
      const chars = [...new Set(req.characterIds)];
      const prods = [...new Set(req.productIds)];
      const scenes = [...new Set(req.sceneIds)];
      await sql.begin(async (tx) => {
        if (chars.length) {
          await tx`UPDATE characters SET times_used = times_used + 1, last_used_at = now()
                   WHERE tenant_id = ${tenantId} AND id = ANY(${idArray(chars)}::bigint[])`;
        }
        if (prods.length) {
          await tx`UPDATE products SET times_used = times_used + 1, last_used_at = now()
                   WHERE tenant_id = ${tenantId} AND id = ANY(${idArray(prods)}::bigint[])`;
        }
        if (scenes.length) {
          await tx`UPDATE scenes SET times_used = times_used + 1, last_used_at = now()
                   WHERE tenant_id = ${tenantId} AND id = ANY(${idArray(scenes)}::bigint[])`;
        }
        if (req.stylePresetId) {
          await tx`UPDATE style_presets SET times_used = times_used + 1, last_used_at = now()
                   WHERE tenant_id = ${tenantId} AND id = ${req.stylePresetId}`;
        }
      });
      return {};
    },
  };
}
