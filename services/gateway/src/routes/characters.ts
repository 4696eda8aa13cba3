import type { CharacterGenerateBody, CharacterInput, CharacterUpdateInput, Infer, MultiCharacterGenerateBody } from '@imagegen/api-schemas';
import {
  characterDetail,
  characterListForm,
  createCharacterRequest,
  scenePromptWithDetails,
  updateCharacterRequest,
} from '@imagegen/operations';
import { invalidPayload } from '@imagegen/platform';
import { answerGeneration } from '../generation-answer.js';
import type { RouteModule } from '../types.js';
import { assetListRequest, assetPagination, str } from './asset-schemas.js';

/**
 * Characters (SPEC 4.2), snake_case. `:identifier` is the numeric id or the URL-encoded exact name.
 * The generate endpoints compose a GenerateImages request (generation service) with the character ids;
 * generation resolves the characters through AssetsService.ResolveGenerationAssets and records their use.
 */

const charactersRoutes: RouteModule = (app, { clients }) => {
  const assets = clients.assets;

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

  app.post('/api/characters/generate-multi', async (request, reply) => {
    const b = request.body as Infer<typeof MultiCharacterGenerateBody>;
    const characterIds = [...new Set(b.character_ids)];
    if (characterIds.length < 2) throw invalidPayload(['character_ids must have at least 2 distinct items']);
    return answerGeneration(request, reply, clients, {
      operation: 'POST /api/characters/generate-multi',
      generate: {
        prompt: scenePromptWithDetails(b.scene_prompt, b.additional_details),
        characterIds: { values: characterIds },
        aspectRatio: b.aspect_ratio,
        n: 1,
        sessionId: b.session_id,
        toolName: 'generate_multi_character_image',
      },
      presentation: { characterCount: characterIds.length },
    });
  });

  app.post('/api/characters/:identifier/generate', async (request, reply) => {
    const { identifier } = request.params as { identifier: string };
    const b = request.body as Infer<typeof CharacterGenerateBody>;
    const character = await assets.getCharacter({ identifier }, request.principal);
    return answerGeneration(request, reply, clients, {
      operation: 'POST /api/characters/:identifier/generate',
      generate: {
        prompt: scenePromptWithDetails(b.scene_prompt, b.additional_details),
        characterId: character.id,
        // Absent: generation falls back to the character's preferred_aspect_ratio (SPEC 4.1 rule 3).
        aspectRatio: b.aspect_ratio,
        negativePrompt: str(b.override_negative_prompt),
        n: 1,
        sessionId: b.session_id,
        toolName: 'generate_character_image',
      },
      presentation: { characterName: character.characterName },
    });
  });
};

export default charactersRoutes;
