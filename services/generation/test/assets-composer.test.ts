/**
 * ResolveGenerationAssets / MarkAssetsUsed and the generation composer built on them, against the whole
 * stack (real library, usage and tenancy services). The composer is what generation plugs in to apply the
 * saved assets (SPEC 4.1 rules 1-5); until it is wired there, this test drives it directly.
 */
import type { GenerateImagesRequest } from '@imagegen/contracts/generation/v1/generation';
import { AssetsServiceService } from '@imagegen/contracts/library/v1/assets';
import { createClient, internalPrincipal, type Principal } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ImageServer, seeder, solidImage, startAssetsStack, startImageServer } from '../../../test/e2e/products-support.js';
import type { TestStack, TestTenant } from '../../../test/support/stack.js';
import { REFERENCE_MODE_INSTRUCTIONS } from '../../library/src/assets/resolve.js';
import { checkAssetFields, createAssetsComposer } from '../src/assets-composer.js';
import type { Composer } from '../src/compose.js';

let s: TestStack;
let t: TestTenant;
let other: TestTenant;
let img: ImageServer;
let seed: ReturnType<typeof seeder>;
let composer: ReturnType<typeof createAssetsComposer>;
let assets: ReturnType<typeof createClient<typeof AssetsServiceService>>;
let principal: Principal;

// Compile-time guard: the composer fits generation's Composer interface.
const _fits: (c: ReturnType<typeof createAssetsComposer>) => Composer = (c) => c;

beforeAll(async () => {
  [s, img] = await Promise.all([startAssetsStack(), startImageServer()]);
  [t, other] = await Promise.all([s.createTenant(), s.createTenant()]);
  seed = seeder(s);
  composer = createAssetsComposer(s.stack.ctx);
  assets = createClient(AssetsServiceService, () => s.stack.ctx.resolve('library'));
  principal = internalPrincipal(t.tenantId);
});
afterAll(async () => {
  composer?.close();
  assets?.close();
  seed?.close();
  await img?.close();
  await s?.stop();
});

const api = (path: string, body: unknown, key = t.liveKey) => s.api(path, { key, body });
const plan = (prompt: string, provider: 'provA' | 'provB' = 'provA', over: Record<string, string> = {}) => ({
  model: { provider },
  prompt,
  ...over,
});
const req = (over: Partial<GenerateImagesRequest>): GenerateImagesRequest => ({ prompt: 'x', ...over }) as GenerateImagesRequest;

describe('composer checks (no lookups)', () => {
  it('refuses singular and array forms together and enforces the counts', () => {
    expect(checkAssetFields(req({ characterId: 1, characterIds: { values: [2] } }), { provider: 'provA' })).toContain(
      'character_id and character_ids cannot be combined',
    );
    expect(checkAssetFields(req({ productId: 1, productIds: { values: [2] } }), { provider: 'provA' })).toContain(
      'product_id and product_ids cannot be combined',
    );
    expect(checkAssetFields(req({ characterIds: { values: [1, 2, 3, 4, 5] } }), { provider: 'provA' })).toEqual([]);
    expect(checkAssetFields(req({ characterIds: { values: [1, 2, 3, 4, 5, 6] } }), { provider: 'provA' })).toEqual([
      'character_ids must have between 1 and 5 items',
    ]);
    expect(checkAssetFields(req({ productIds: { values: [1, 2, 3, 4, 5, 6] } }), { provider: 'provA' })).toEqual([]);
    expect(checkAssetFields(req({ productIds: { values: [1, 2, 3, 4, 5, 6, 7] } }), { provider: 'provA' })).toEqual([
      'product_ids must have between 1 and 6 items',
    ]);
    expect(checkAssetFields(req({ referenceMode: 'blend' }), { provider: 'provA' })).toEqual(['reference_mode must be one of: style, add']);
    const keys = (n: number) => ({ values: Array.from({ length: n }, (_, i) => `tenants/x/k${i}.png`) });
    expect(checkAssetFields(req({ referenceImages: keys(14) }), { provider: 'provA' })).toEqual([]);
    expect(checkAssetFields(req({ referenceImages: keys(15) }), { provider: 'provA' })).toHaveLength(1);
    expect(checkAssetFields(req({ referenceImages: keys(16) }), { provider: 'provB' })).toEqual([]);
    expect(checkAssetFields(req({ referenceImages: keys(17) }), { provider: 'provB' })).toHaveLength(1);
  });
});

describe('composition from saved assets', () => {
  it('composes prompt, negative prompt, system instruction, ratio, reference images and ids', async () => {
    const [c1, c2, sc1] = [await seed.image(t.tenantId), await seed.image(t.tenantId), await seed.image(t.tenantId)];
    const knight = (
      await api('/api/characters', {
        character_name: 'Knight',
        base_prompt: 'a knight in silver armour',
        negative_prompt: 'modern clothes',
        system_instruction: 'Keep the knight consistent.',
        preferred_aspect_ratio: 'portrait',
        reference_image_ids: [c1.id, c2.id],
      })
    ).body.data;
    const mage = (await api('/api/characters', { character_name: 'Mage', base_prompt: 'an old mage with a long beard' })).body.data;
    const mug = (await api('/api/products', { product_name: 'Mug', product_url: `${img.url}/red.png`, product_description: 'A red mug.' }))
      .body.data;
    const style = (
      await api('/api/style-presets', {
        name: 'Oil',
        prompt: 'oil painting,',
        negative_prompt: 'photo',
        system_instruction: 'Paint.',
        aspect_ratio: '3:2',
      })
    ).body.data;
    const scene = (
      await api('/api/scenes', {
        scene_name: 'Tavern',
        scene_prompt: 'inside a tavern',
        reference_image_ids: [sc1.id],
        default_reference_mode: 'style',
        preferred_aspect_ratio: '16:9',
      })
    ).body.data;

    const r = await composer.compose({
      req: req({ characterIds: { values: [knight.id, mage.id] }, productId: mug.id, stylePresetId: style.id, referenceGroupId: scene.id }),
      plan: plan('They share a drink'),
      principal,
    });
    expect(r.prompt).toBe(
      [
        'oil painting,',
        'inside a tavern',
        'Characters in this scene:\n1. Knight: a knight in silver armour\n2. Mage: an old mage with a long beard\nProduct "Mug": A red mug. Show this product exactly as it appears in its reference image.',
        'They share a drink',
        REFERENCE_MODE_INSTRUCTIONS.style,
      ].join('\n\n'),
    );
    expect(r.negativePrompt).toBe('photo, modern clothes');
    expect(r.systemInstruction).toBe('Paint.\n\nKeep the knight consistent.');
    expect(r.aspectRatio).toBe('16:9'); // scene first
    expect(r.referenceImages).toHaveLength(4); // 2 character refs, the product image, 1 scene ref
    for (const i of r.referenceImages) expect(i.data.length).toBeGreaterThan(0);
    expect(r).toMatchObject({ stylePresetId: style.id, productReferenceId: mug.id, characterId: knight.id, referenceGroupIds: [scene.id] });

    // Request values override asset defaults; style preset ratio comes before the character's.
    const r2 = await composer.compose({
      req: req({ characterId: knight.id, stylePresetName: 'Oil' }),
      plan: plan('Alone', 'provB', { negativePrompt: 'mine', systemInstruction: 'my instruction' }),
      principal,
    });
    expect(r2.prompt).toBe('oil painting,\n\nCharacter "Knight": a knight in silver armour\n\nAlone');
    expect(r2).toMatchObject({ negativePrompt: 'mine', systemInstruction: 'my instruction', aspectRatio: '3:2', referenceGroupIds: [] });
    const r3 = await composer.compose({ req: req({ characterId: knight.id }), plan: plan('Alone'), principal });
    expect(r3.aspectRatio).toBe('3:4'); // the character's 'portrait'

    // Use is recorded after success.
    await r.afterSuccess?.();
    const after = (await s.api(`/api/characters/${knight.id}`, { key: t.liveKey })).body.data;
    expect(after.times_used).toBe(1);
    expect(after.last_used_at).toEqual(expect.any(String));
    expect((await s.api(`/api/products/${mug.id}`, { key: t.liveKey })).body.data.timesUsed).toBe(1);
    expect((await s.api(`/api/scenes/${scene.id}`, { key: t.liveKey })).body.data.timesUsed).toBe(1);
  });

  it('without assets leaves the request untouched', async () => {
    const r = await composer.compose({ req: req({}), plan: plan('plain', 'provA', { negativePrompt: 'n' }), principal });
    expect(r).toEqual({
      prompt: 'plain',
      negativePrompt: 'n',
      systemInstruction: undefined,
      referenceImages: [],
      referenceGroupIds: [],
      referenceObjectKeys: [],
    });
  });

  it('resolves reference groups by name, reference_mode add, and request reference images', async () => {
    const [a, b] = [await seed.image(t.tenantId), await seed.image(t.tenantId)];
    await api('/api/scenes', { scene_name: 'Garden group', reference_image_ids: [a.id] });
    const r = await composer.compose({
      req: req({ referenceGroupName: 'Garden group', referenceMode: 'add', referenceImages: { values: [b.objectKey] } }),
      plan: plan('A picnic'),
      principal,
    });
    expect(r.prompt).toBe(`A picnic\n\n${REFERENCE_MODE_INSTRUCTIONS.add}`);
    expect(r.referenceImages).toHaveLength(2);
  });

  it('refuses more than 14 (provA) / 16 (provB) total reference images', async () => {
    const images = await Promise.all(Array.from({ length: 10 }, () => seed.image(t.tenantId)));
    const g1 = (await api('/api/scenes', { scene_name: 'g1', reference_image_ids: images.slice(0, 5).map((i) => i.id) })).body.data;
    const g2 = (await api('/api/scenes', { scene_name: 'g2', reference_image_ids: images.slice(5, 10).map((i) => i.id) })).body.data;
    const extra = await Promise.all(Array.from({ length: 6 }, () => seed.image(t.tenantId, { data: undefined })));
    const keys = (n: number) => ({ values: extra.slice(0, n).map((i) => i.objectKey) });
    const ok = await composer.compose({
      req: req({ referenceGroupIds: { values: [g1.id, g2.id] }, referenceImages: keys(4) }),
      plan: plan('p'),
      principal,
    });
    expect(ok.referenceImages).toHaveLength(14);
    await expect(
      composer.compose({
        req: req({ referenceGroupIds: { values: [g1.id, g2.id] }, referenceImages: keys(5) }),
        plan: plan('p'),
        principal,
      }),
    ).rejects.toMatchObject({ status: 400, body: { error: 'Invalid request payload' } });
    const okB = await composer.compose({
      req: req({ referenceGroupIds: { values: [g1.id, g2.id] }, referenceImages: keys(6) }),
      plan: plan('p', 'provB'),
      principal,
    });
    expect(okB.referenceImages).toHaveLength(16);
  });

  it("refuses unknown and other tenants' assets with the 404 texts", async () => {
    const foreignChar = (await api('/api/characters', { character_name: 'Foreign', base_prompt: 'someone else entirely' }, other.liveKey))
      .body.data;
    const foreignStyle = (await api('/api/style-presets', { name: 'Foreign style' }, other.liveKey)).body.data;
    const cases: [Partial<GenerateImagesRequest>, string][] = [
      [{ characterId: foreignChar.id }, 'Character not found'],
      [{ productId: 99999999 }, 'Product not found'],
      [{ stylePresetId: foreignStyle.id }, 'Style preset not found'],
      [{ stylePresetName: 'Foreign style' }, 'Style preset not found'],
      [{ referenceGroupId: 99999999 }, 'Reference group 99999999 not found for this tenant'],
    ];
    for (const [r, error] of cases) {
      await expect(composer.compose({ req: req(r), plan: plan('p'), principal })).rejects.toMatchObject({ status: 404, body: { error } });
    }
  });

  it('ResolveGenerationAssets reports every piece separately', async () => {
    const style = (await api('/api/style-presets', { name: 'Sepia', prompt: 'sepia tone', aspect_ratio: 'landscape' })).body.data;
    const scene = (await api('/api/scenes', { scene_name: 'Dock', scene_prompt: 'at the dock', preferred_aspect_ratio: '21:9' })).body.data;
    const r = await assets.resolveGenerationAssets(
      { characterIds: [], productIds: [], stylePresetId: style.id, sceneName: 'Dock', referenceGroupIds: [] },
      principal,
    );
    expect(r).toMatchObject({
      promptPrefix: 'sepia tone\n\nat the dock',
      stylePromptPrefix: 'sepia tone',
      scenePromptPrefix: 'at the dock',
      aspectRatioScene: '21:9',
      aspectRatioStyle: 'landscape',
      aspectRatioDefault: '21:9',
      sceneId: scene.id,
      stylePresetId: style.id,
      referenceGroupIds: [scene.id],
      referenceObjectKeys: [],
      characterAndProductPrompt: '',
    });
    expect(r.finalPrompt).toBeUndefined();
    const png = await solidImage(8, 8);
    expect(png.length).toBeGreaterThan(0);
  });

  it('style_preset_id is an id only and scene_name a name only (numeric names never stand in for ids)', async () => {
    // A style preset named like an id the tenant does not have must not answer for style_preset_id.
    const digits = '987654321';
    expect((await api('/api/style-presets', { name: digits, prompt: 'digits style' })).status).toBe(200);
    await expect(
      assets.resolveGenerationAssets({ characterIds: [], productIds: [], stylePresetId: Number(digits), referenceGroupIds: [] }, principal),
    ).rejects.toMatchObject({ status: 404, body: { error: 'Style preset not found' } });
    await expect(composer.compose({ req: req({ stylePresetId: Number(digits) }), plan: plan('p'), principal })).rejects.toMatchObject({
      status: 404,
      body: { error: 'Style preset not found' },
    });

    // A scene whose name is another scene's id: scene_name picks the named scene.
    const first = (await api('/api/scenes', { scene_name: 'Numbered target', scene_prompt: 'the scene with that id' })).body.data;
    const named = (await api('/api/scenes', { scene_name: String(first.id), scene_prompt: 'the scene with that name' })).body.data;
    const r = await assets.resolveGenerationAssets(
      { characterIds: [], productIds: [], sceneName: String(first.id), referenceGroupIds: [] },
      principal,
    );
    expect(r.sceneId).toBe(named.id);
    expect(r.scenePromptPrefix).toBe('the scene with that name');
  });
});
