import {
  ASPECT_RATIOS,
  allowedModelsOf,
  BACKGROUNDS,
  defaultModelFor,
  EXTENDED_QUALITIES,
  IMAGES_PER_REQUEST_MAX,
  MODEL_IDS,
  MODERATIONS,
  NEGATIVE_PROMPT_MAX,
  OUTPUT_COMPRESSION_MAX,
  OUTPUT_FORMATS,
  PROMPT_MAX,
  QUALITIES,
  RESOLUTION_TIERS,
  SESSION_ID_MAX,
  SYSTEM_INSTRUCTION_MAX,
  type TenantModels,
} from '@imagegen/api-schemas/vocab';
import type { GenerateImagesRequest } from '@imagegen/contracts/generation/v1/generation';
import { invalidPayload } from '@imagegen/platform';
import type { Composer } from './compose.js';
import { MODELS, type ModelInfo, normalizeRatio, parseSize, ratioOfSize, sizeProblems } from './models.js';
import type { GeneratePlan } from './plan.js';

export type { GeneratePlan };

const EXTENDED_MODELS = MODEL_IDS.filter((m) => MODELS[m].extended).join(' or ');
const HIGHER_TIER_MODELS = MODEL_IDS.filter((m) => MODELS[m].higherTiers).join(' or ');

/** Whether `v` is one of a vocabulary list (the lists are typed by their values; requests carry strings). */
const isOneOf = (list: readonly string[], v: string) => list.includes(v);

/**
 * Characters no provider takes in a prompt: C0 control characters other than tab, line feed and carriage
 * return (NUL among them), and UTF-16 surrogates without their pair (not encodable as UTF-8). Sent upstream
 * they are a refusal (or a provider fault) caused by the request's content, so they are refused here with a
 * 400 before anything is sent, and never reach a circuit breaker.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const UNSENDABLE = /[\u0000-\u0008\u000B\u000C\u000E-\u001F]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The detail line for a text field holding characters a provider cannot take, else undefined. */
export function unsendableProblem(v: string | undefined | null, name: string): string | undefined {
  if (typeof v !== 'string') return undefined;
  const m = UNSENDABLE.exec(v);
  if (!m) return undefined;
  const code = m[0].charCodeAt(0);
  const what = code < 0x20 ? `control character U+${code.toString(16).toUpperCase().padStart(4, '0')}` : 'an unpaired surrogate';
  return `${name} must not contain ${what} (only tab, line feed and carriage return are allowed among control characters)`;
}

export function sessionIdProblem(v: string, name: string): string | undefined {
  return v.length < 1 || v.length > SESSION_ID_MAX ? `${name} must be between 1 and ${SESSION_ID_MAX} characters` : undefined;
}

/**
 * Every rule of POST /api/images (SPEC 4.1) that needs no saved asset, plus the composer's checks of
 * the asset fields. Throws 400 'Invalid request payload' with one detail per problem.
 */
export function validateGenerate(
  req: GenerateImagesRequest,
  c: { tenant: TenantModels; headerSessionId?: string; composer: Composer },
): GeneratePlan {
  const d: string[] = [];
  const has = <K extends keyof GenerateImagesRequest>(k: K) => req[k] !== undefined && req[k] !== null;

  // model first: the prompt limit and the provider-specific rules depend on it
  let model: ModelInfo | undefined;
  const modelId = req.modelId ?? defaultModelFor(c.tenant);
  if (!Object.hasOwn(MODELS, modelId)) d.push(`model_id must be one of: ${MODEL_IDS.join(', ')}`);
  else if (!allowedModelsOf(c.tenant).includes(modelId)) {
    d.push(`model_id ${modelId} is not allowed for this tenant (allowed: ${allowedModelsOf(c.tenant).join(', ')})`);
  } else model = MODELS[modelId];

  // prompt
  const prompt = req.prompt;
  if (prompt === undefined || prompt === null) d.push('prompt is required');
  else if (prompt.trim().length === 0) d.push('prompt cannot be empty');
  else {
    const limit = model ? PROMPT_MAX[model.provider] : PROMPT_MAX.provB;
    if (prompt.length > limit) d.push(`prompt must be at most ${limit} characters${model ? ` for ${model.provider} models` : ''}`);
  }
  for (const [value, name] of [
    [prompt, 'prompt'],
    [req.negativePrompt, 'negative_prompt'],
    [req.systemInstruction, 'system_instruction'],
  ] as const) {
    const problem = unsendableProblem(value, name);
    if (problem) d.push(problem);
  }
  if (has('negativePrompt') && (req.negativePrompt as string).length > NEGATIVE_PROMPT_MAX) {
    d.push(`negative_prompt must be at most ${NEGATIVE_PROMPT_MAX} characters`);
  }
  if (has('systemInstruction') && (req.systemInstruction as string).length > SYSTEM_INSTRUCTION_MAX) {
    d.push(`system_instruction must be at most ${SYSTEM_INSTRUCTION_MAX} characters`);
  }

  // aspect ratio
  let aspectRatio: string | undefined;
  if (has('aspectRatio')) {
    aspectRatio = normalizeRatio(req.aspectRatio as string);
    if (!aspectRatio) d.push(`aspect_ratio must be one of: ${ASPECT_RATIOS.join(', ')}`);
  }

  // n
  const n = req.n ?? 1;
  if (!Number.isInteger(n) || n < 1 || n > IMAGES_PER_REQUEST_MAX) d.push(`n must be between 1 and ${IMAGES_PER_REQUEST_MAX}`);

  const provA = model?.provider === 'provA';
  const provB = model?.provider === 'provB';

  // provA-only fields
  let tier: string | undefined;
  if (has('resolutionTier')) {
    const t = (req.resolutionTier as string).trim().toLowerCase();
    if (!isOneOf(RESOLUTION_TIERS, t)) d.push(`resolution_tier must be one of: ${RESOLUTION_TIERS.join(', ')}`);
    else if (provB) d.push('resolution_tier is only supported by provA models (use size with provB models)');
    else if (model && !model.higherTiers && t !== '1k') {
      d.push(`resolution_tier ${t} is not available for ${model.id} (fixed at 1K); use ${HIGHER_TIER_MODELS}`);
    } else if (model?.higherTiers) tier = t;
  }
  if (has('useProvaSearch') && req.useProvaSearch) {
    if (provB) d.push('use_provA_search is only supported by provA models');
    else if (model && !model.search) d.push(`use_provA_search needs ${MODEL_IDS.filter((m) => MODELS[m].search).join(' or ')}`);
  }
  if (has('enableThinking') && req.enableThinking && provB) d.push('enable_thinking is only supported by provA models');

  // provB-only fields
  const provBOnly: [keyof GenerateImagesRequest, string][] = [
    ['size', 'size'],
    ['outputFormat', 'output_format'],
    ['quality', 'quality'],
    ['outputCompression', 'output_compression'],
    ['background', 'background'],
    ['moderation', 'moderation'],
  ];
  if (provA) for (const [k, name] of provBOnly) if (has(k)) d.push(`${name} is only supported by provB models`);

  const outputFormat = (req.outputFormat ?? 'png') as GeneratePlan['outputFormat'];
  if (has('outputFormat') && !isOneOf(OUTPUT_FORMATS, req.outputFormat as string)) {
    d.push(`output_format must be one of: ${OUTPUT_FORMATS.join(', ')}`);
  }
  if (has('quality')) {
    const q = req.quality as string;
    if (!isOneOf(QUALITIES, q)) d.push(`quality must be one of: ${QUALITIES.join(', ')}`);
    else if (provB && isOneOf(EXTENDED_QUALITIES, q) && !model?.extended) d.push(`quality ${q} requires ${EXTENDED_MODELS}`);
  }
  if (has('outputCompression')) {
    const oc = req.outputCompression as number;
    if (!Number.isInteger(oc) || oc < 0 || oc > OUTPUT_COMPRESSION_MAX)
      d.push(`output_compression must be between 0 and ${OUTPUT_COMPRESSION_MAX}`);
    else if (provB && !['jpeg', 'webp'].includes(outputFormat))
      d.push('output_compression is only supported with output_format jpeg or webp');
  }
  if (has('background')) {
    const b = req.background as string;
    if (!isOneOf(BACKGROUNDS, b)) d.push(`background must be one of: ${BACKGROUNDS.join(', ')}`);
    else if (provB && b === 'transparent') {
      if (!model?.extended) d.push(`background transparent requires ${EXTENDED_MODELS}`);
      if (!['png', 'webp'].includes(outputFormat)) d.push('background transparent requires output_format png or webp');
    }
  }
  if (has('moderation') && !isOneOf(MODERATIONS, req.moderation as string)) d.push(`moderation must be one of: ${MODERATIONS.join(', ')}`);
  if (has('size')) {
    const size = (req.size as string).trim().toLowerCase();
    const problems = sizeProblems(size);
    d.push(...problems);
    if (problems.length === 0 && aspectRatio && size !== 'auto') {
      const dims = parseSize(size);
      if (dims && ratioOfSize(dims.width, dims.height) !== aspectRatio) d.push(`aspect_ratio ${aspectRatio} does not match size ${size}`);
    }
  }

  // session
  let sessionId: string | undefined;
  if (has('sessionId')) {
    const p = sessionIdProblem(req.sessionId as string, 'session_id');
    if (p) d.push(p);
    else sessionId = req.sessionId;
  } else if (c.headerSessionId !== undefined) {
    const p = sessionIdProblem(c.headerSessionId, 'X-Session-Id');
    if (p) d.push(p);
    else sessionId = c.headerSessionId;
  }

  if (has('imageToEditId') && (!Number.isInteger(req.imageToEditId) || (req.imageToEditId as number) < 1)) {
    d.push('image_to_edit_id must be a positive integer');
  }

  d.push(...c.composer.check(req, model));

  if (d.length > 0 || !model) throw invalidPayload(d);
  return {
    model,
    prompt: prompt as string,
    negativePrompt: req.negativePrompt || undefined,
    aspectRatio,
    n,
    tier: provA ? tier : undefined,
    search: provA && !!req.useProvaSearch,
    thinking: provA && !!req.enableThinking,
    size: provB && req.size ? req.size.trim().toLowerCase() : undefined,
    outputFormat: provB ? outputFormat : 'png',
    quality: provB ? req.quality : undefined,
    outputCompression: provB ? req.outputCompression : undefined,
    background: provB ? req.background : undefined,
    moderation: provB ? req.moderation : undefined,
    systemInstruction: req.systemInstruction || undefined,
    sessionId,
    imageToEditId: req.imageToEditId,
  };
}
