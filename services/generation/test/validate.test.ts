import { defaultModelFor, type TenantModels } from '@imagegen/api-schemas/vocab';
import type { GenerateImagesRequest } from '@imagegen/contracts/generation/v1/generation';
import { AppError } from '@imagegen/platform';
import { describe, expect, it } from 'vitest';
import { checkAssetFields } from '../src/assets-composer.js';
import type { Composer } from '../src/compose.js';
import { closestRatio, MODEL_IDS, ratioOfSize, sizeProblems, tierOf } from '../src/models.js';
import { validateGenerate } from '../src/validate.js';

const ALL = { allowedModels: MODEL_IDS };
/** Validation runs the composer's lookup-free checks only; composing is the pipeline's business. */
const composer: Composer = {
  check: checkAssetFields,
  compose: () => Promise.reject(new Error('validation never composes')),
};
const run = (req: GenerateImagesRequest, tenant: TenantModels = ALL, headerSessionId?: string) =>
  validateGenerate(req, { tenant, headerSessionId, composer });
const details = (req: GenerateImagesRequest, tenant?: TenantModels, header?: string): string[] => {
  try {
    run(req, tenant, header);
  } catch (err) {
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).status).toBe(400);
    expect((err as AppError).body.error).toBe('Invalid request payload');
    return (err as AppError).body.details as string[];
  }
  throw new Error('expected a validation error');
};
const A = 'provA-flash-lite-image';
const AF = 'provA-flash-image';
const AP = 'provA-pro-image';
const B2 = 'provB-image-2';
const B25 = 'provB-image-2.5-flare';
const B25S = 'provB-image-2.5-sunburst';

describe('prompt', () => {
  it('is required and not blank', () => {
    expect(details({})).toEqual(['prompt is required']);
    expect(details({ prompt: '   ' })).toEqual(['prompt cannot be empty']);
  });
  it('is limited to 16384 for provA and 32000 for provB', () => {
    expect(run({ prompt: 'x'.repeat(16384) }).prompt).toHaveLength(16384);
    expect(details({ prompt: 'x'.repeat(16385) })).toEqual(['prompt must be at most 16384 characters for provA models']);
    expect(run({ prompt: 'x'.repeat(32000), modelId: B2 }).prompt).toHaveLength(32000);
    expect(details({ prompt: 'x'.repeat(32001), modelId: B2 })).toEqual(['prompt must be at most 32000 characters for provB models']);
    expect(run({ prompt: 'x'.repeat(20000), modelId: B25 }).model.id).toBe(B25);
  });
  it('negative_prompt at most 1024', () => {
    expect(run({ prompt: 'p', negativePrompt: 'n'.repeat(1024) }).negativePrompt).toHaveLength(1024);
    expect(details({ prompt: 'p', negativePrompt: 'n'.repeat(1025) })).toEqual(['negative_prompt must be at most 1024 characters']);
  });
  it('system_instruction at most 4000', () => {
    expect(details({ prompt: 'p', systemInstruction: 's'.repeat(4001) })).toEqual(['system_instruction must be at most 4000 characters']);
  });
});

describe('aspect ratio and n', () => {
  it('accepts the ten ratios and the aliases', () => {
    for (const r of ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'])
      expect(run({ prompt: 'p', aspectRatio: r }).aspectRatio).toBe(r);
    expect(run({ prompt: 'p', aspectRatio: 'square' }).aspectRatio).toBe('1:1');
    expect(run({ prompt: 'p', aspectRatio: 'portrait' }).aspectRatio).toBe('3:4');
    expect(run({ prompt: 'p', aspectRatio: 'Landscape' }).aspectRatio).toBe('4:3');
  });
  it('refuses other ratios', () => {
    expect(details({ prompt: 'p', aspectRatio: '7:5' })[0]).toMatch(/^aspect_ratio must be one of: square, portrait, landscape, 1:1/);
    // Names of Object.prototype's members are not aliases (the fuzz once got a function through as the ratio).
    for (const r of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      expect(details({ prompt: 'p', aspectRatio: r })[0]).toMatch(/^aspect_ratio must be one of/);
      expect(details({ prompt: 'p', modelId: r })[0]).toMatch(/^model_id must be one of/);
    }
  });
  it('n is 1-4', () => {
    expect(run({ prompt: 'p' }).n).toBe(1);
    expect(run({ prompt: 'p', n: 4 }).n).toBe(4);
    expect(details({ prompt: 'p', n: 0 })).toEqual(['n must be between 1 and 4']);
    expect(details({ prompt: 'p', n: 5 })).toEqual(['n must be between 1 and 4']);
  });
});

describe('model and allowlist', () => {
  it('defaults to provA-flash-lite-image, else the tenant model', () => {
    expect(run({ prompt: 'p' }).model.id).toBe(A);
    expect(run({ prompt: 'p' }, { modelId: AP, allowedModels: MODEL_IDS }).model.id).toBe(AP);
    expect(defaultModelFor({ allowedModels: [B2] })).toBe(B2);
  });
  it('refuses unknown and not allowed models', () => {
    expect(details({ prompt: 'p', modelId: 'dall-e' })[0]).toMatch(/^model_id must be one of: provA-flash-lite-image/);
    expect(details({ prompt: 'p', modelId: B2 }, { allowedModels: [A] })).toEqual([
      'model_id provB-image-2 is not allowed for this tenant (allowed: provA-flash-lite-image)',
    ]);
  });
});

describe('provA options', () => {
  it('resolution_tier: lite fixed at 1k, flash/pro all tiers', () => {
    expect(run({ prompt: 'p', resolutionTier: '1k' }).tier).toBeUndefined();
    expect(details({ prompt: 'p', resolutionTier: '2k' })).toEqual([
      'resolution_tier 2k is not available for provA-flash-lite-image (fixed at 1K); use provA-flash-image or provA-pro-image',
    ]);
    expect(details({ prompt: 'p', resolutionTier: '0.5k' })[0]).toMatch(/fixed at 1K/);
    for (const m of [AF, AP])
      for (const t of ['0.5k', '1k', '2k', '4k']) expect(run({ prompt: 'p', modelId: m, resolutionTier: t }).tier).toBe(t);
    expect(run({ prompt: 'p', modelId: AF, resolutionTier: '4K' }).tier).toBe('4k');
    expect(details({ prompt: 'p', modelId: AF, resolutionTier: '8k' })).toEqual(['resolution_tier must be one of: 0.5k, 1k, 2k, 4k']);
  });
  it('use_provA_search needs flash or pro; enable_thinking any provA model', () => {
    expect(details({ prompt: 'p', useProvaSearch: true })).toEqual(['use_provA_search needs provA-flash-image or provA-pro-image']);
    expect(run({ prompt: 'p', modelId: AF, useProvaSearch: true }).search).toBe(true);
    expect(run({ prompt: 'p', modelId: AP, useProvaSearch: true }).search).toBe(true);
    expect(run({ prompt: 'p', useProvaSearch: false }).search).toBe(false);
    for (const m of [A, AF, AP]) expect(run({ prompt: 'p', modelId: m, enableThinking: true }).thinking).toBe(true);
  });
  it('refuses provA-only options on provB models', () => {
    expect(details({ prompt: 'p', modelId: B2, resolutionTier: '2k', useProvaSearch: true, enableThinking: true })).toEqual([
      'resolution_tier is only supported by provA models (use size with provB models)',
      'use_provA_search is only supported by provA models',
      'enable_thinking is only supported by provA models',
    ]);
  });
  it('refuses provB-only options on provA models, one detail each', () => {
    expect(
      details({
        prompt: 'p',
        size: '1024x1024',
        outputFormat: 'png',
        quality: 'high',
        outputCompression: 50,
        background: 'opaque',
        moderation: 'low',
      }),
    ).toEqual([
      'size is only supported by provB models',
      'output_format is only supported by provB models',
      'quality is only supported by provB models',
      'output_compression is only supported by provB models',
      'background is only supported by provB models',
      'moderation is only supported by provB models',
    ]);
  });
});

describe('provB options', () => {
  it('quality: low/medium/high/auto everywhere, xhigh/max only on 2.5', () => {
    for (const q of ['low', 'medium', 'high', 'auto']) expect(run({ prompt: 'p', modelId: B2, quality: q }).quality).toBe(q);
    for (const q of ['xhigh', 'max']) {
      expect(details({ prompt: 'p', modelId: B2, quality: q })).toEqual([
        `quality ${q} requires provB-image-2.5-flare or provB-image-2.5-sunburst`,
      ]);
      expect(run({ prompt: 'p', modelId: B25, quality: q }).quality).toBe(q);
      expect(run({ prompt: 'p', modelId: B25S, quality: q }).quality).toBe(q);
    }
    expect(details({ prompt: 'p', modelId: B25, quality: 'ultra' })[0]).toMatch(/^quality must be one of/);
  });
  it('output_format png (default), jpeg, webp', () => {
    expect(run({ prompt: 'p', modelId: B2 }).outputFormat).toBe('png');
    expect(run({ prompt: 'p', modelId: B2, outputFormat: 'webp' }).outputFormat).toBe('webp');
    expect(details({ prompt: 'p', modelId: B2, outputFormat: 'gif' })).toEqual(['output_format must be one of: png, jpeg, webp']);
  });
  it('output_compression 0-100 only with jpeg or webp', () => {
    expect(run({ prompt: 'p', modelId: B2, outputFormat: 'jpeg', outputCompression: 0 }).outputCompression).toBe(0);
    expect(run({ prompt: 'p', modelId: B2, outputFormat: 'webp', outputCompression: 100 }).outputCompression).toBe(100);
    expect(details({ prompt: 'p', modelId: B2, outputFormat: 'jpeg', outputCompression: 101 })).toEqual([
      'output_compression must be between 0 and 100',
    ]);
    expect(details({ prompt: 'p', modelId: B2, outputFormat: 'jpeg', outputCompression: -1 })).toEqual([
      'output_compression must be between 0 and 100',
    ]);
    expect(details({ prompt: 'p', modelId: B2, outputCompression: 50 })).toEqual([
      'output_compression is only supported with output_format jpeg or webp',
    ]);
  });
  it('background: transparent only on 2.5 with png or webp', () => {
    expect(run({ prompt: 'p', modelId: B2, background: 'opaque' }).background).toBe('opaque');
    expect(details({ prompt: 'p', modelId: B2, background: 'transparent' })).toEqual([
      'background transparent requires provB-image-2.5-flare or provB-image-2.5-sunburst',
    ]);
    expect(run({ prompt: 'p', modelId: B25, background: 'transparent' }).background).toBe('transparent');
    expect(run({ prompt: 'p', modelId: B25S, background: 'transparent', outputFormat: 'webp' }).background).toBe('transparent');
    expect(details({ prompt: 'p', modelId: B25, background: 'transparent', outputFormat: 'jpeg' })).toEqual([
      'background transparent requires output_format png or webp',
    ]);
    expect(details({ prompt: 'p', modelId: B2, background: 'clear' })).toEqual(['background must be one of: auto, opaque, transparent']);
  });
  it('moderation auto or low', () => {
    expect(run({ prompt: 'p', modelId: B2, moderation: 'low' }).moderation).toBe('low');
    expect(details({ prompt: 'p', modelId: B2, moderation: 'off' })).toEqual(['moderation must be one of: auto, low']);
  });
  it('size rules', () => {
    expect(run({ prompt: 'p', modelId: B2, size: 'auto' }).size).toBe('auto');
    expect(run({ prompt: 'p', modelId: B2, size: '1024x1536' }).size).toBe('1024x1536');
    expect(run({ prompt: 'p', modelId: B2, size: '3840x2160' }).size).toBe('3840x2160');
    expect(run({ prompt: 'p', modelId: B2, size: '1024x640' }).size).toBe('1024x640'); // exactly 655,360 px
    expect(details({ prompt: 'p', modelId: B2, size: 'big' })).toEqual(['size must be auto or WIDTHxHEIGHT (e.g. 1024x1536)']);
    expect(details({ prompt: 'p', modelId: B2, size: '1000x1000' })).toEqual(['size width and height must be multiples of 16']);
    expect(details({ prompt: 'p', modelId: B2, size: '3856x1440' })).toEqual(['size longest edge must be at most 3840 pixels']);
    expect(details({ prompt: 'p', modelId: B2, size: '2400x784' })).toEqual(['size long:short ratio must be at most 3:1']);
    expect(details({ prompt: 'p', modelId: B2, size: '1008x640' })).toEqual([
      'size must have between 655,360 and 8,294,400 pixels in total',
    ]);
    expect(details({ prompt: 'p', modelId: B2, size: '3840x2176' })).toEqual([
      'size must have between 655,360 and 8,294,400 pixels in total',
    ]);
    expect(details({ prompt: 'p', modelId: B2, size: '1024x1024', aspectRatio: '16:9' })).toEqual([
      'aspect_ratio 16:9 does not match size 1024x1024',
    ]);
    expect(run({ prompt: 'p', modelId: B2, size: '1024x1024', aspectRatio: 'square' }).size).toBe('1024x1024');
  });
});

describe('session and edits', () => {
  it('session_id 1-200 from the body or X-Session-Id', () => {
    expect(run({ prompt: 'p', sessionId: 's'.repeat(200) }).sessionId).toHaveLength(200);
    expect(details({ prompt: 'p', sessionId: '' })).toEqual(['session_id must be between 1 and 200 characters']);
    expect(details({ prompt: 'p', sessionId: 's'.repeat(201) })).toEqual(['session_id must be between 1 and 200 characters']);
    expect(run({ prompt: 'p' }, ALL, 'from-header').sessionId).toBe('from-header');
    expect(run({ prompt: 'p', sessionId: 'body' }, ALL, 'header').sessionId).toBe('body');
    expect(details({ prompt: 'p' }, ALL, 'h'.repeat(201))).toEqual(['X-Session-Id must be between 1 and 200 characters']);
  });
  it('image_to_edit_id is a positive integer', () => {
    expect(run({ prompt: 'p', imageToEditId: 7 }).imageToEditId).toBe(7);
    expect(details({ prompt: 'p', imageToEditId: 0 })).toEqual(['image_to_edit_id must be a positive integer']);
  });
  it("reports the saved-asset fields' problems in the same 400 as every other rule", () => {
    const d = details({
      prompt: 'p',
      characterId: 1,
      characterIds: { values: [1] },
      productIds: { values: [] },
      referenceMode: 'mix',
    });
    expect(d).toEqual([
      'character_id and character_ids cannot be combined',
      'product_ids must have between 1 and 6 items',
      'reference_mode must be one of: style, add',
    ]);
  });
  it('reports every problem at once', () => {
    const d = details({ negativePrompt: 'n'.repeat(2000), aspectRatio: 'wide', n: 9, size: 'x', modelId: A });
    expect(d).toEqual([
      'prompt is required',
      'negative_prompt must be at most 1024 characters',
      expect.stringMatching(/^aspect_ratio must be one of/),
      'n must be between 1 and 4',
      'size is only supported by provB models',
      'size must be auto or WIDTHxHEIGHT (e.g. 1024x1536)',
    ]);
  });
});

describe('geometry helpers', () => {
  it('closest ratio, size ratio and tiers', () => {
    expect(closestRatio(1920, 1080)).toBe('16:9');
    expect(closestRatio(1000, 1000)).toBe('1:1');
    expect(closestRatio(800, 1000)).toBe('4:5');
    expect(ratioOfSize(1536, 1024)).toBe('3:2');
    expect(ratioOfSize(1024, 640)).toBe('8:5');
    expect(tierOf(512, 512)).toBe('0.5k');
    expect(tierOf(1376, 768)).toBe('1k');
    expect(tierOf(3168, 1344)).toBe('2k');
    expect(tierOf(4096, 4096)).toBe('4k');
    expect(sizeProblems('auto')).toEqual([]);
  });
});
