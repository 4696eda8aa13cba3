import { AssetsServiceService } from '@imagegen/contracts/library/v1/assets';
import { createClient, type Principal } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LibraryHarness, startLibrary } from './support.js';

/**
 * Races on saved assets, made certain rather than likely: the test holds a row lock on the asset while the
 * racing calls start, waits until both are blocked on it (pg_stat_activity), then lets them go.
 */
let h: LibraryHarness;
let assets: ReturnType<typeof createClient<typeof AssetsServiceService>>;
let p: Principal;
const tenant = 'tAC';

beforeAll(async () => {
  h = await startLibrary();
  assets = createClient(AssetsServiceService, h.running.grpcAddress as string);
  p = h.principal(tenant);
});
afterAll(async () => {
  assets?.close();
  await h?.stop();
});

/** Runs `calls` while row `id` of `table` is locked; resolves with their outcomes once both waited on the lock. */
async function whileLocked<T>(table: string, id: number, calls: () => Promise<T>[]): Promise<PromiseSettledResult<T>[]> {
  let running: Promise<PromiseSettledResult<T>[]> | undefined;
  await h.sql.begin(async (tx) => {
    await tx`SELECT 1 FROM ${tx(table)} WHERE id = ${id} FOR UPDATE`;
    const before = Date.now();
    running = Promise.allSettled(calls());
    for (;;) {
      const [{ n }] = await h.sql`SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE ${`%${table}%`}`;
      if (n >= 2) break;
      if (Date.now() - before > 10_000) throw new Error('the racing calls never waited on the row lock');
    }
  });
  return running as Promise<PromiseSettledResult<T>[]>;
}

const statuses = (r: PromiseSettledResult<unknown>[]) =>
  r.map((x) => (x.status === 'fulfilled' ? 200 : ((x.reason as { status?: number }).status ?? 0))).sort();

describe('saved assets under concurrency', () => {
  it('two PATCHes of one scene setting different fields: both changes are kept (no lost update)', async () => {
    const scene = await assets.createScene(
      { sceneName: 'race scene', scenePrompt: 'a quiet harbour', referenceImageIds: [], referenceImageUrls: [], tags: ['old'] },
      p,
    );
    const r = await whileLocked('scenes', scene.id, () => [
      assets.updateScene(
        {
          identifier: String(scene.id),
          presentFields: ['description'],
          description: 'at dawn',
          referenceImageIds: [],
          referenceImageUrls: [],
          tags: [],
        },
        p,
      ),
      assets.updateScene(
        { identifier: String(scene.id), presentFields: ['tags'], referenceImageIds: [], referenceImageUrls: [], tags: ['new'] },
        p,
      ),
    ]);
    expect(statuses(r)).toEqual([200, 200]);
    const after = await assets.getScene({ identifier: String(scene.id) }, p);
    expect(after.description).toBe('at dawn');
    expect(after.tags).toEqual(['new']);
  });

  it('a rename racing another PATCH is not reverted by it', async () => {
    const scene = await assets.createScene(
      { sceneName: 'before rename', scenePrompt: 'a field', referenceImageIds: [], referenceImageUrls: [], tags: [] },
      p,
    );
    const r = await whileLocked('scenes', scene.id, () => [
      assets.updateScene(
        {
          identifier: String(scene.id),
          presentFields: ['new_scene_name'],
          newSceneName: 'after rename',
          referenceImageIds: [],
          referenceImageUrls: [],
          tags: [],
        },
        p,
      ),
      assets.updateScene(
        {
          identifier: String(scene.id),
          presentFields: ['scene_prompt'],
          scenePrompt: 'a field of wheat',
          referenceImageIds: [],
          referenceImageUrls: [],
          tags: [],
        },
        p,
      ),
    ]);
    expect(statuses(r)).toEqual([200, 200]);
    const after = await assets.getScene({ identifier: String(scene.id) }, p);
    expect(after).toMatchObject({ sceneName: 'after rename', scenePrompt: 'a field of wheat' });
  });

  it('concurrent deletes of one character, scene or style preset: one succeeds, the other is a 404', async () => {
    const character = await assets.createCharacter(
      { characterName: 'racer', basePrompt: 'a tall person in a red coat', referenceImageIds: [], tags: [] },
      p,
    );
    const rc = await whileLocked('characters', character.id, () => [
      assets.deleteCharacter({ identifier: String(character.id) }, p),
      assets.deleteCharacter({ identifier: String(character.id) }, p),
    ]);
    expect(statuses(rc)).toEqual([200, 404]);

    const scene = await assets.createScene(
      { sceneName: 'doomed', scenePrompt: 'a storm', referenceImageIds: [], referenceImageUrls: [], tags: [] },
      p,
    );
    const rs = await whileLocked('scenes', scene.id, () => [
      assets.deleteScene({ identifier: String(scene.id) }, p),
      assets.deleteScene({ identifier: String(scene.id) }, p),
    ]);
    expect(statuses(rs)).toEqual([200, 404]);

    const preset = await assets.createStylePreset({ name: 'noir', prompt: 'black and white' }, p);
    const rp = await whileLocked('style_presets', preset.id, () => [
      assets.deleteStylePreset({ identifier: String(preset.id) }, p),
      assets.deleteStylePreset({ identifier: String(preset.id) }, p),
    ]);
    expect(statuses(rp)).toEqual([200, 404]);
  });

  it('concurrent creates of one name: one is created, the others get the SPEC duplicate answer (never a 500)', async () => {
    const results = await Promise.allSettled([
      ...Array.from({ length: 4 }, () =>
        assets.createCharacter({ characterName: 'twin', basePrompt: 'a person with a hat', referenceImageIds: [], tags: [] }, p),
      ),
    ]);
    expect(statuses(results)).toEqual([200, 409, 409, 409]);
    const scenes = await Promise.allSettled(
      Array.from({ length: 4 }, () =>
        assets.createScene({ sceneName: 'same', scenePrompt: 'a beach', referenceImageIds: [], referenceImageUrls: [], tags: [] }, p),
      ),
    );
    // SPEC 7: a duplicate scene name is a 400, a duplicate search preset name too.
    expect(statuses(scenes)).toEqual([200, 400, 400, 400]);
    const searches = await Promise.allSettled(
      Array.from({ length: 4 }, () => assets.createSearchPreset({ presetName: 'same', filtersJson: '{}' }, p)),
    );
    expect(statuses(searches)).toEqual([200, 400, 400, 400]);
    const presets = await Promise.allSettled(Array.from({ length: 4 }, () => assets.createStylePreset({ name: 'same' }, p)));
    expect(statuses(presets)).toEqual([200, 409, 409, 409]);
  });
});
