import {
  BASE_PROMPT_MAX,
  BASE_PROMPT_MIN,
  CharacterGenerateBody,
  CharacterInput,
  CharacterUpdateInput,
  MultiCharacterGenerateBody,
} from '@imagegen/api-schemas';
import { Int64List } from '@imagegen/contracts/generation/v1/generation';
import {
  characterDetail,
  characterImageJson,
  characterListForm,
  createCharacterRequest,
  GENERATE_DEADLINE_MS,
  multiCharacterImageJson,
  scenePromptWithDetails,
  updateCharacterRequest,
} from '@imagegen/operations';
import { invalidPayload } from '@imagegen/platform';
import { deleteTool, getTool, listTool, orUndef } from './crud.js';
import { defineTool, idString, s } from './framework.js';
import { newSessionId, runGeneration, thumbnailsOfGenerated } from './generation-run.js';

const listCharacters = listTool({
  name: 'list_characters',
  description: 'List saved characters (search by name, sort by name, created, used or recent).',
  operation: 'GET /api/characters',
  list: (assets, query, principal) => assets.listCharacters(query, principal),
  items: (r) => r.characters,
  form: characterListForm,
});

const getCharacter = getTool({
  name: 'get_character',
  description: 'Get a saved character by id or name, with its reference images.',
  operation: 'GET /api/characters/:identifier',
  address: { identifier: 'Character' },
  get: (assets, req, principal) => assets.getCharacter(req, principal),
  form: characterDetail,
});

const createCharacter = defineTool({
  name: 'create_character',
  description: `Create a saved character (unique name, base prompt ${BASE_PROMPT_MIN}-${BASE_PROMPT_MAX} characters, optional reference images).`,
  operation: 'POST /api/characters',
  input: CharacterInput.shape,
  annotations: { readOnlyHint: false, destructiveHint: false },
  async run(args, ctx) {
    const c = await ctx.deps.clients.assets.createCharacter(createCharacterRequest(args), ctx.principal);
    return { data: { data: characterDetail(c) } };
  },
});

const updateCharacter = defineTool({
  name: 'update_character',
  description: 'Change a character; only given fields change (reference_image_ids and tags replace, null clears).',
  operation: 'PATCH /api/characters/:identifier',
  input: { identifier: s.identifier('Character'), ...CharacterUpdateInput.shape },
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
  async run(args, ctx) {
    const { identifier, ...fields } = args;
    const c = await ctx.deps.clients.assets.updateCharacter(updateCharacterRequest(idString(identifier), fields), ctx.principal);
    return { data: { data: characterDetail(c) } };
  },
});

const deleteCharacter = deleteTool({
  name: 'delete_character',
  description: 'Delete a saved character (generated images keep their character_id).',
  operation: 'DELETE /api/characters/:identifier',
  address: { identifier: 'Character' },
  del: (assets, req, principal) => assets.deleteCharacter(req, principal),
});

const generateCharacterImage = defineTool({
  name: 'generate_character_image',
  description: 'Generate an image of a saved character in a scene.',
  operation: 'POST /api/characters/:identifier/generate',
  input: { identifier: s.identifier('Character'), ...CharacterGenerateBody.shape },
  annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  async run(args, ctx) {
    const character = await ctx.deps.clients.assets.getCharacter({ identifier: idString(args.identifier) }, ctx.principal);
    const sessionId = args.session_id ?? newSessionId();
    return runGeneration(ctx, {
      sessionId,
      call: async (principal, executionId) => {
        const res = await ctx.deps.clients.generating.generateImages(
          {
            prompt: scenePromptWithDetails(args.scene_prompt, args.additional_details),
            characterId: character.id,
            aspectRatio: args.aspect_ratio,
            negativePrompt: orUndef(args.override_negative_prompt),
            n: 1,
            sessionId,
            toolName: 'generate_character_image',
            executionId,
          },
          principal,
          { timeoutMs: GENERATE_DEADLINE_MS },
        );
        const img = res.images[0];
        // The thumbnail size is on the library record (GeneratedImage does not carry it), as REST reads it.
        const record = await ctx.deps.clients.library.resolveImages({ imageIds: [img.recordId] }, principal);
        const thumbnailSizeBytes = record.images.find((i) => i.id === img.recordId)?.thumbnailSizeBytes ?? 0;
        return {
          executionId: res.executionId,
          data: { data: characterImageJson(res, character.characterName, thumbnailSizeBytes), executionId: res.executionId },
          images: await thumbnailsOfGenerated({ ...ctx, principal }, [img]),
        };
      },
    });
  },
});

const generateMultiCharacterImage = defineTool({
  name: 'generate_multi_character_image',
  description: 'Generate one image showing 2-5 saved characters together.',
  operation: 'POST /api/characters/generate-multi',
  input: MultiCharacterGenerateBody.shape,
  annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  async run(args, ctx) {
    const characterIds = [...new Set(args.character_ids)];
    if (characterIds.length < 2) throw invalidPayload(['character_ids must have at least 2 distinct items']);
    const sessionId = args.session_id ?? newSessionId();
    return runGeneration(ctx, {
      sessionId,
      call: async (principal, executionId) => {
        const res = await ctx.deps.clients.generating.generateImages(
          {
            prompt: scenePromptWithDetails(args.scene_prompt, args.additional_details),
            characterIds: Int64List.fromPartial({ values: characterIds }),
            aspectRatio: args.aspect_ratio,
            n: 1,
            sessionId,
            toolName: 'generate_multi_character_image',
            executionId,
          },
          principal,
          { timeoutMs: GENERATE_DEADLINE_MS },
        );
        return {
          executionId: res.executionId,
          data: { data: multiCharacterImageJson(res, characterIds.length), executionId: res.executionId },
          images: await thumbnailsOfGenerated({ ...ctx, principal }, [res.images[0]]),
        };
      },
    });
  },
});

export const characterTools = [
  listCharacters,
  getCharacter,
  createCharacter,
  updateCharacter,
  deleteCharacter,
  generateCharacterImage,
  generateMultiCharacterImage,
];
