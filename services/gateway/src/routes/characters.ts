import type { CharacterGenerateBody, CharacterInput, CharacterUpdateInput, Infer, MultiCharacterGenerateBody } from '@imagegen/api-schemas';
import type { GeneratedImage } from '@imagegen/contracts/generation/v1/generation';
import {
  characterDetail,
  characterImageJson,
  characterListForm,
  createCharacterRequest,
  multiCharacterImageJson,
  scenePromptWithDetails,
  updateCharacterRequest,
} from '@imagegen/operations';
import { invalidPayload } from '@imagegen/platform';
import type { RouteModule } from '../types.js';
import { assetListRequest, assetPagination, str } from './asset-schemas.js';

/**
 * Characters (SPEC 4.2), snake_case. `:identifier` is the numeric id or the URL-encoded exact name.
 * The generate endpoints compose a GenerateImages request (generation service) with the character ids;
 * generation resolves the characters through AssetsService.ResolveGenerationAssets and records their use.
 */

const charactersRoutes: RouteModule = (app, { clients }) => {
  const assets = clients.assets;
  const generation = clients.generating;
  const library = clients.library;

  /** Thumbnail sizes are not part of GeneratedImage; the library record has them. */
  async function thumbnailSizes(images: GeneratedImage[], principal: Parameters<typeof library.resolveImages>[1]) {
    if (images.length === 0) return new Map<number, number>();
    const res = await library.resolveImages({ imageIds: images.map((i) => i.recordId) }, principal);
    return new Map(res.images.map((i) => [i.id, i.thumbnailSizeBytes]));
  }

  app.get('/api/characters', async (request) => {
    const res = await assets.listCharacters(assetListRequest(request.query), request.principal);
    return {
      data: res.characters.map(characterListForm),
      pagination: assetPagination(res),
    };
  });

  app.get('/api/characters/:identifier', async (request) => {
    const { identifier } = request.params as { identifier: string };
    return { data: characterDetail(await assets.getCharacter({ identifier }, request.principal)) };
  });

  app.post('/api/characters', async (request) => {
    const b = request.body as Infer<typeof CharacterInput>;
    const c = await assets.createCharacter(createCharacterRequest(b), request.principal);
    return { data: characterDetail(c) };
  });

  app.patch('/api/characters/:identifier', async (request) => {
    const { identifier } = request.params as { identifier: string };
    const b = (request.body ?? {}) as Infer<typeof CharacterUpdateInput>;
    const c = await assets.updateCharacter(updateCharacterRequest(identifier, b), request.principal);
    return { data: characterDetail(c) };
  });

  app.delete('/api/characters/:identifier', async (request) => {
    const { identifier } = request.params as { identifier: string };
    await assets.deleteCharacter({ identifier }, request.principal);
    return { data: { deleted: true } };
  });

  app.post('/api/characters/generate-multi', async (request) => {
    const b = request.body as Infer<typeof MultiCharacterGenerateBody>;
    const characterIds = [...new Set(b.character_ids)];
    if (characterIds.length < 2) throw invalidPayload(['character_ids must have at least 2 distinct items']);
    const prompt = scenePromptWithDetails(b.scene_prompt, b.additional_details);
    const res = await generation.generateImages(
      {
        prompt,
        characterIds: { values: characterIds },
        aspectRatio: b.aspect_ratio,
        n: 1,
        sessionId: b.session_id,
        toolName: 'generate_multi_character_image',
      },
      request.principal,
    );
    return { data: multiCharacterImageJson(res, characterIds.length) };
  });

  app.post('/api/characters/:identifier/generate', async (request) => {
    const { identifier } = request.params as { identifier: string };
    const b = request.body as Infer<typeof CharacterGenerateBody>;
    const character = await assets.getCharacter({ identifier }, request.principal);
    const res = await generation.generateImages(
      {
        prompt: scenePromptWithDetails(b.scene_prompt, b.additional_details),
        characterId: character.id,
        // Absent: generation falls back to the character's preferred_aspect_ratio (SPEC 4.1 rule 3).
        aspectRatio: b.aspect_ratio,
        negativePrompt: str(b.override_negative_prompt),
        n: 1,
        sessionId: b.session_id,
        toolName: 'generate_character_image',
      },
      request.principal,
    );
    const thumbs = await thumbnailSizes([res.images[0]], request.principal);
    return { data: characterImageJson(res, character.characterName, thumbs.get(res.images[0].recordId) ?? 0) };
  });
};

export default charactersRoutes;
