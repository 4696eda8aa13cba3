import { type GeneratedImage, GenerationServiceService } from '@imagegen/contracts/generation/v1/generation';
import { AssetsServiceService } from '@imagegen/contracts/library/v1/assets';
import { LibraryServiceService } from '@imagegen/contracts/library/v1/library';
import {
  characterDetail,
  characterImageJson,
  characterListForm,
  createClient,
  invalidPayload,
  multiCharacterImageJson,
} from '@imagegen/platform';
import type { RouteModule } from '../app.js';
import { ID_MAX } from '../validation.js';
import { assetListQuery, assetListRequest, assetPagination, identifierParams, nullable, str } from './asset-schemas.js';

/**
 * Characters (SPEC 4.2), snake_case. `:identifier` is the numeric id or the URL-encoded exact name.
 * The generate endpoints compose a GenerateImages request (generation service) with the character ids;
 * generation resolves the characters through AssetsService.ResolveGenerationAssets and records their use.
 */
const TAGS = ['Characters'];

const characterFields = {
  character_name: { type: 'string', minLength: 1, maxLength: 100 },
  base_prompt: { type: 'string', description: '10-2000 characters' },
  description: nullable('string', { maxLength: 500 }),
  negative_prompt: nullable('string', { maxLength: 1000 }),
  system_instruction: nullable('string', { maxLength: 1000 }),
  preferred_aspect_ratio: nullable('string'),
  // Ids that are no image of the tenant (0 and negatives included) answer SPEC 7's invalid_ids error (service).
  reference_image_ids: { type: 'array', maxItems: 10, items: { type: 'integer', minimum: -ID_MAX, maximum: ID_MAX } },
  tags: nullable('array', { maxItems: 20, items: { type: 'string', maxLength: 50 } }),
};

type Body = Record<string, unknown>;
const ids = (v: unknown): number[] => (Array.isArray(v) ? (v as number[]) : []);
const strs = (v: unknown): string[] => (Array.isArray(v) ? (v as string[]) : []);

/** "<scene prompt>" or "<scene prompt>\n\nAdditional details: <details>". */
export function scenePromptWithDetails(scenePrompt: string, details?: string | null): string {
  const d = typeof details === 'string' ? details.trim() : '';
  return d ? `${scenePrompt.trim()}\n\nAdditional details: ${d}` : scenePrompt.trim();
}

const charactersRoutes: RouteModule = (app, { ctx }) => {
  const assets = createClient(AssetsServiceService, () => ctx.resolve('library'));
  const generation = createClient(GenerationServiceService, () => ctx.resolve('generation'));
  const library = createClient(LibraryServiceService, () => ctx.resolve('library'));
  app.addHook('onClose', async () => {
    assets.close();
    generation.close();
    library.close();
  });

  /** Thumbnail sizes are not part of GeneratedImage; the library record has them. */
  async function thumbnailSizes(images: GeneratedImage[], principal: Parameters<typeof library.resolveImages>[1]) {
    if (images.length === 0) return new Map<number, number>();
    const res = await library.resolveImages({ imageIds: images.map((i) => i.recordId) }, principal);
    return new Map(res.images.map((i) => [i.id, i.thumbnailSizeBytes]));
  }

  app.get(
    '/api/characters',
    {
      schema: {
        tags: TAGS,
        summary: 'List characters',
        querystring: assetListQuery,
      },
    },
    async (request) => {
      const res = await assets.listCharacters(assetListRequest(request.query), request.principal);
      return {
        data: res.characters.map(characterListForm),
        pagination: assetPagination(res),
      };
    },
  );

  app.get(
    '/api/characters/:identifier',
    { schema: { tags: TAGS, summary: 'Get a character by id or name', params: identifierParams } },
    async (request) => {
      const { identifier } = request.params as { identifier: string };
      return { data: characterDetail(await assets.getCharacter({ identifier }, request.principal)) };
    },
  );

  app.post(
    '/api/characters',
    {
      schema: {
        tags: TAGS,
        summary: 'Create a character',
        body: { type: 'object', required: ['character_name', 'base_prompt'], properties: characterFields },
      },
    },
    async (request) => {
      const b = request.body as Body;
      const c = await assets.createCharacter(
        {
          characterName: b.character_name as string,
          basePrompt: b.base_prompt as string,
          description: str(b.description),
          negativePrompt: str(b.negative_prompt),
          systemInstruction: str(b.system_instruction),
          preferredAspectRatio: str(b.preferred_aspect_ratio),
          referenceImageIds: ids(b.reference_image_ids),
          tags: strs(b.tags),
        },
        request.principal,
      );
      return { data: characterDetail(c) };
    },
  );

  app.patch(
    '/api/characters/:identifier',
    {
      schema: {
        tags: TAGS,
        summary: 'Update a character (only given fields change; reference_image_ids and tags replace)',
        params: identifierParams,
        body: { type: 'object', properties: characterFields },
      },
    },
    async (request) => {
      const { identifier } = request.params as { identifier: string };
      const b = (request.body ?? {}) as Body;
      const present = Object.keys(characterFields).filter((k) => k in b);
      if (present.includes('character_name') && b.character_name === null) throw invalidPayload(['character_name cannot be null']);
      const c = await assets.updateCharacter(
        {
          identifier,
          presentFields: present,
          characterName: str(b.character_name),
          basePrompt: str(b.base_prompt),
          description: str(b.description),
          negativePrompt: str(b.negative_prompt),
          systemInstruction: str(b.system_instruction),
          preferredAspectRatio: str(b.preferred_aspect_ratio),
          referenceImageIds: ids(b.reference_image_ids),
          tags: strs(b.tags),
        },
        request.principal,
      );
      return { data: characterDetail(c) };
    },
  );

  app.delete(
    '/api/characters/:identifier',
    { schema: { tags: TAGS, summary: 'Delete a character (generated images keep their character_id)', params: identifierParams } },
    async (request) => {
      const { identifier } = request.params as { identifier: string };
      await assets.deleteCharacter({ identifier }, request.principal);
      return { data: { deleted: true } };
    },
  );

  app.post(
    '/api/characters/generate-multi',
    {
      schema: {
        tags: TAGS,
        summary: 'Generate one image with 2-5 characters',
        body: {
          type: 'object',
          required: ['character_ids', 'scene_prompt'],
          properties: {
            character_ids: { type: 'array', minItems: 2, maxItems: 5, items: { type: 'integer', minimum: 1, maximum: ID_MAX } },
            scene_prompt: { type: 'string', minLength: 10, maxLength: 1500 },
            additional_details: nullable('string', { maxLength: 500 }),
            aspect_ratio: { type: 'string', default: 'landscape' },
            session_id: { type: 'string', minLength: 1, maxLength: 200 },
          },
        },
      },
    },
    async (request) => {
      const b = request.body as {
        character_ids: number[];
        scene_prompt: string;
        additional_details?: string | null;
        aspect_ratio: string;
        session_id?: string;
      };
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
    },
  );

  app.post(
    '/api/characters/:identifier/generate',
    {
      schema: {
        tags: TAGS,
        summary: 'Generate an image of a character (id or URL-encoded name)',
        params: identifierParams,
        body: {
          type: 'object',
          required: ['scene_prompt'],
          properties: {
            scene_prompt: { type: 'string', minLength: 5, maxLength: 1500 },
            additional_details: nullable('string', { maxLength: 500 }),
            aspect_ratio: { type: 'string' },
            override_negative_prompt: nullable('string', { maxLength: 1024 }),
            session_id: { type: 'string', minLength: 1, maxLength: 200 },
          },
        },
      },
    },
    async (request) => {
      const { identifier } = request.params as { identifier: string };
      const b = request.body as {
        scene_prompt: string;
        additional_details?: string | null;
        aspect_ratio?: string;
        override_negative_prompt?: string | null;
        session_id?: string;
      };
      const character = await assets.getCharacter({ identifier }, request.principal);
      const res = await generation.generateImages(
        {
          prompt: scenePromptWithDetails(b.scene_prompt, b.additional_details),
          characterId: character.id,
          // Absent: generation falls back to the character's preferred_aspect_ratio (SPEC 4.1 rule 3).
          aspectRatio: b.aspect_ratio,
          negativePrompt: typeof b.override_negative_prompt === 'string' ? b.override_negative_prompt : undefined,
          n: 1,
          sessionId: b.session_id,
          toolName: 'generate_character_image',
        },
        request.principal,
      );
      const thumbs = await thumbnailSizes([res.images[0]], request.principal);
      return { data: characterImageJson(res, character.characterName, thumbs.get(res.images[0].recordId) ?? 0) };
    },
  );
};

export default charactersRoutes;
