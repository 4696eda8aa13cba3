import { randomUUID } from 'node:crypto';
import { IMAGES_PER_SESSION_MAX } from '@imagegen/api-schemas/vocab';
import {
  type EditImageRequest,
  type EditImageResponse,
  type GeneratedImage,
  type GenerateImagesRequest,
  GenerateImagesRequest as GenerateImagesRequestCodec,
  type GenerateImagesResponse,
} from '@imagegen/contracts/generation/v1/generation';
import type { GetImageDataResponse, ImageRecord } from '@imagegen/contracts/library/v1/library';
import { toGeneratedImage } from '@imagegen/operations';
import {
  AppError,
  badRequest,
  type Config,
  type DirectPublisher,
  dependencyUnavailable,
  forbidden,
  invalidPayload,
  isAppError,
  type Logger,
  type Principal,
  quotaExceeded,
  type Sql,
  unauthorized,
} from '@imagegen/platform';
import sharp from 'sharp';
import type { Composer } from './compose.js';
import type { Collaborators } from './deps.js';
import { ExecutionTracker, executionCancelled } from './executions.js';
import type { CancelRegistry } from './jobs/cancels.js';
import { type ClaimedJob, enqueueJob } from './jobs/queue.js';
import { closestRatio, PROVB_SIZE_FOR_RATIO, type Provider, parseSize, ratioOfSize, tierOf, upstreamModel } from './models.js';
import type { GeneratePlan } from './plan.js';
import type { ProviderClient } from './providers/client.js';
import type { InputImage, ProviderRequest, ProviderResult } from './providers/types.js';
import type { GenerationSettings } from './settings.js';
import { validateGenerate } from './validate.js';

export interface PipelineDeps {
  sql: Sql;
  /** The generation relay's direct publishing (ExecutionFinished); absent in some service tests. */
  outbox?: DirectPublisher;
  config: Config;
  logger: Logger;
  settings: GenerationSettings;
  collaborators: Collaborators;
  providers: Record<Provider, ProviderClient>;
  composer: Composer;
  /** This process's id in the liveness table (see failOrphanedExecutions); absent in some service tests. */
  instanceId?: string;
  /** The cancels of the executions this process runs (jobs/runner.ts); absent in some service tests. */
  cancels?: CancelRegistry;
}

export const TOOL_SOURCE_DEFAULT = 'tenant_api';

/** Images a new session takes (SPEC 8: 1,000 per session). */
const NEW_SESSION_ROOM = IMAGES_PER_SESSION_MAX;
/** The longest pause between tries of the commit of a completed execution's images. */
const COMMIT_RETRY_MAX_MS = 1000;

export function requireTenant(p: Principal): string {
  if (!p.tenantId) throw unauthorized();
  return p.tenantId;
}

/** The principal with its session replaced (calls to library carry the session being used). */
const withSession = (p: Principal, sessionId: string): Principal => ({ ...p, sessionId });

/** The prompt sent upstream: neither protocol has a negative prompt, so it is folded into the text. */
export function upstreamPrompt(prompt: string, negative?: string): string {
  return negative ? `${prompt}\n\nAvoid: ${negative}` : prompt;
}

/** Look-ups done side by side with the execution's creation. */
interface Prepared {
  remaining: number;
  keys: string[];
  source?: GetImageDataResponse;
}

interface Produced {
  data: Buffer;
  mimeType: string;
  width: number;
  height: number;
}

/**
 * Generate and edit: validate -> execution -> session capacity -> source image (edits) -> compose ->
 * provider (keys, breaker, timeout) -> quota -> store through the library -> execution completed.
 * Any failure after validation marks the execution failed and is rethrown to the caller.
 */
export class GenerationPipeline {
  constructor(private readonly deps: PipelineDeps) {}

  /** Starts the call's execution, with the id its caller chose (requestedExecutionId) or a new one. */
  async startExecution(
    p: Principal,
    tenantId: string,
    sessionId: string,
    toolName: string,
    modelId: string,
    firstLog: string,
    executionId?: string,
  ) {
    return ExecutionTracker.start(
      this.deps.sql,
      {
        executionId: executionId ?? randomUUID(),
        tenantId,
        sessionId,
        toolName,
        toolSource: p.source || TOOL_SOURCE_DEFAULT,
        modelId,
        keyType: p.keyType ?? 'live',
        currentStep: 'validated',
        firstLog,
        instanceId: this.deps.instanceId,
      },
      this.deps.config.eventsPrefix,
      this.deps.logger,
      this.deps.outbox,
    );
  }

  /**
   * Completes the execution, then lists and bills its pending images. Fails instead when the caller went
   * away first (its process died or it cancelled): a caller that never got the answer is never charged.
   * The answer reports only images that are listed (issue 35): once 'completed' is written the images are the
   * caller's and will be billed (the library's consumer of ExecutionFinished commits them if this call cannot), so
   * the commit is retried until it lands, as long as the caller waits (its deadline or cancel): a 503 would be
   * billed, and a 200 before the commit would hand out URLs that are not listed yet. Only a database that went
   * away between the two writes makes the caller wait, for as long as it stays away.
   */
  async completeWithImages(
    exec: ExecutionTracker,
    principal: Principal,
    done: { message: string; summary: string; imageIds: number[]; requested?: number },
    signal?: AbortSignal,
  ): Promise<void> {
    if (signal?.aborted) throw dependencyUnavailable(1);
    await exec.complete(done.message, done.summary, done.imageIds, done.requested, signal);
    for (let wait = 100; ; wait = Math.min(wait * 2, COMMIT_RETRY_MAX_MS)) {
      try {
        // Exactly the images the caller is told of: a pending image whose store answer was lost is discarded.
        await this.deps.collaborators.commitExecutionImages(principal, exec.tenantId, exec.executionId, done.imageIds);
        return;
      } catch (err) {
        if (signal?.aborted) {
          // The caller is gone: the ExecutionFinished consumer commits them (what that caller was told of).
          this.deps.logger.warn({ err, executionId: exec.executionId }, 'commit of completed images failed and the caller went away');
          throw dependencyUnavailable(1);
        }
        this.deps.logger.warn({ err, executionId: exec.executionId }, 'commit of completed images failed; retrying while the caller waits');
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }

  /** Validates a generate request as its caller (the rules of SPEC 4.1); what running it needs. */
  private async prepare(req: GenerateImagesRequest, principal: Principal) {
    const tenantId = requireTenant(principal);
    const tenant = await this.deps.collaborators.getTenant(principal, tenantId);
    if (!tenant.isActive) throw forbidden('Tenant account is inactive');
    const plan: GeneratePlan = {
      ...validateGenerate(req, { tenant, headerSessionId: principal.sessionId, composer: this.deps.composer }),
      credentialsIncludePrompt: tenant.credentialsIncludePrompt,
    };
    const sessionId = plan.sessionId ?? randomUUID();
    const isEdit = plan.imageToEditId !== undefined;
    const toolName = req.toolName || (isEdit ? 'edit_image' : 'generate_image');
    const firstLog = `${isEdit ? `Editing image ${plan.imageToEditId}` : `Generating ${plan.n} image(s)`} with ${plan.model.id}`;
    return { tenantId, plan, sessionId, toolName, firstLog, p: withSession(principal, sessionId) };
  }

  /** The look-ups a run needs besides the execution: the session's room, the provider keys, an edit's source. */
  private lookups(plan: GeneratePlan, p: Principal, tenantId: string, sessionId: string, sessionIsNew: boolean) {
    const { collaborators } = this.deps;
    return [
      // A session the call did not name is new and empty: nothing to look up (the library writes its row with
      // the first image stored in it).
      sessionIsNew ? Promise.resolve({ remaining: NEW_SESSION_ROOM }) : collaborators.touchSession(p, tenantId, sessionId),
      collaborators.getProviderKeys(p, tenantId, plan.model.provider),
      plan.imageToEditId !== undefined ? collaborators.getImageData(p, plan.imageToEditId) : Promise.resolve(undefined),
    ] as const;
  }

  /** A synchronous call: its execution starts running here at once (the gateway caps these per tenant). */
  async generate(req: GenerateImagesRequest, principal: Principal, signal?: AbortSignal): Promise<GenerateImagesResponse> {
    const { tenantId, plan, sessionId, toolName, firstLog, p } = await this.prepare(req, principal);
    // Independent look-ups run side by side with the execution's creation.
    const [execR, ...looked] = await Promise.allSettled([
      this.startExecution(principal, tenantId, sessionId, toolName, plan.model.id, firstLog, req.executionId),
      ...this.lookups(plan, p, tenantId, sessionId, plan.sessionId === undefined),
    ]);
    if (execR.status === 'rejected') throw execR.reason;
    return this.execute(execR.value, plan, req, p, looked, signal);
  }

  /**
   * An async job (SubmitJob): validated now, queued durably, run by whichever replica claims it (runJob). The
   * request kept is the one the job runs, with its session and execution ids filled in.
   */
  async submit(
    req: GenerateImagesRequest,
    principal: Principal,
    job: { operation: string; presentation: string },
  ): Promise<{ executionId: string; position: number; sessionId: string }> {
    const { tenantId, plan, sessionId, toolName, firstLog } = await this.prepare(req, principal);
    const executionId = req.executionId ?? randomUUID();
    const request = GenerateImagesRequestCodec.encode({ ...req, sessionId, toolName, executionId }).finish();
    const { position } = await enqueueJob(
      this.deps.sql,
      {
        executionId,
        tenantId,
        sessionId,
        toolName,
        toolSource: principal.source || TOOL_SOURCE_DEFAULT,
        modelId: plan.model.id,
        keyType: principal.keyType ?? 'live',
        request,
        principal: {
          tenantId,
          keyType: principal.keyType,
          scopes: principal.scopes,
          source: principal.source,
          sessionId,
          requestId: principal.requestId,
        },
        operation: job.operation,
        presentation: job.presentation,
        firstLog: `Queued: ${firstLog}`,
      },
      this.deps.config.generation.jobsQueuedPerTenant,
    );
    return { executionId, position, sessionId };
  }

  /** Runs a queued job this process claimed (jobs/runner.ts); its outcome is written to its execution. */
  async runJob(job: ClaimedJob, signal: AbortSignal): Promise<void> {
    const exec = ExecutionTracker.attach(this.deps.sql, job, this.deps.config.eventsPrefix, this.deps.logger, this.deps.outbox);
    const req = GenerateImagesRequestCodec.decode(job.request);
    const principal: Principal = { ...job.principal, requestId: job.principal.requestId || job.executionId };
    let prepared: Awaited<ReturnType<GenerationPipeline['prepare']>>;
    try {
      // Checked again: the tenant may have changed (deactivated, a model withdrawn) while the job waited.
      prepared = await this.prepare(req, principal);
    } catch (err) {
      await exec.fail(err);
      return;
    }
    const { plan, p, tenantId, sessionId } = prepared;
    exec.step('started', 5, `Started: ${prepared.firstLog}`);
    // The job's session was fixed at submit (touching makes its row when it is new).
    const looked = await Promise.allSettled(this.lookups(plan, p, tenantId, sessionId, false));
    await this.execute(exec, plan, req, p, looked, signal).catch(() => {});
  }

  /**
   * Runs an execution that exists (its look-ups settled) and ends it: completed, cancelled when `cancel` fired
   * (409 'Execution cancelled' to a waiting caller), else failed with the error rethrown.
   */
  private async execute(
    exec: ExecutionTracker,
    plan: GeneratePlan,
    req: GenerateImagesRequest,
    p: Principal,
    looked: PromiseSettledResult<unknown>[],
    signal?: AbortSignal,
  ): Promise<GenerateImagesResponse> {
    const cancel = this.deps.cancels?.track(exec.executionId);
    const stop = cancel ? (signal ? AbortSignal.any([signal, cancel.signal]) : cancel.signal) : signal;
    try {
      for (const r of looked) if (r.status === 'rejected') throw r.reason;
      const [session, keys, source] = looked.map((r) => (r as PromiseFulfilledResult<unknown>).value) as [
        { remaining: number },
        string[],
        GetImageDataResponse | undefined,
      ];
      const prepared: Prepared = { remaining: session.remaining, keys, source };
      const images = await this.run(plan, req, p, exec.tenantId, p.sessionId as string, exec, prepared, stop, cancel?.signal);
      return { images, requested: plan.n, generated: images.length, sessionId: p.sessionId as string, executionId: exec.executionId };
    } catch (err) {
      if (cancel?.signal.aborted) {
        await exec.cancel();
        throw executionCancelled();
      }
      await exec.fail(err);
      throw err;
    } finally {
      cancel?.done();
    }
  }

  /** EditImage as the generate request it runs (n = 1, image_to_edit_id); 400 with every problem of the body. */
  async editAsGenerate(req: EditImageRequest, principal: Principal): Promise<GenerateImagesRequest> {
    const details: string[] = [];
    if (req.imageId === undefined || req.imageId === null) details.push('image_id is required');
    else if (!Number.isInteger(req.imageId) || req.imageId < 1) details.push('image_id must be a positive integer');
    const generateReq: GenerateImagesRequest = {
      prompt: req.prompt,
      negativePrompt: req.negativePrompt,
      aspectRatio: req.aspectRatio,
      modelId: req.modelId,
      sessionId: req.sessionId,
      imageToEditId: details.length ? undefined : req.imageId,
      n: 1,
      toolName: req.toolName || 'edit_image',
      executionId: req.executionId,
    };
    if (details.length) {
      // Report the other problems of the body too.
      try {
        const tenantId = requireTenant(principal);
        const tenant = await this.deps.collaborators.getTenant(principal, tenantId);
        validateGenerate(generateReq, { tenant, headerSessionId: principal.sessionId, composer: this.deps.composer });
      } catch (err) {
        if (isAppError(err) && err.status === 400 && Array.isArray(err.body.details)) details.push(...(err.body.details as string[]));
        else throw err;
      }
      throw invalidPayload(details);
    }
    return generateReq;
  }

  async edit(req: EditImageRequest, principal: Principal, signal?: AbortSignal): Promise<EditImageResponse> {
    const res = await this.generate(await this.editAsGenerate(req, principal), principal, signal);
    return { image: res.images[0], sessionId: res.sessionId, executionId: res.executionId };
  }

  private async run(
    plan: GeneratePlan,
    req: GenerateImagesRequest,
    principal: Principal,
    tenantId: string,
    sessionId: string,
    exec: ExecutionTracker,
    prepared: Prepared,
    signal?: AbortSignal,
    /** A cancel of the execution: aborts the provider call too. */
    cancel?: AbortSignal,
  ): Promise<GeneratedImage[]> {
    const { collaborators } = this.deps;
    if (prepared.remaining < plan.n) {
      throw badRequest(`Session ${sessionId} has reached the limit of ${IMAGES_PER_SESSION_MAX.toLocaleString('en-US')} images`, [
        `the session accepts ${prepared.remaining} more image(s)`,
      ]);
    }

    let source: { id: number; image: InputImage; width: number; height: number } | undefined;
    if (plan.imageToEditId !== undefined) {
      const got = prepared.source;
      if (!got?.image) throw new AppError(404, { error: 'Image not found' });
      source = {
        id: got.image.id,
        image: { data: got.data, mimeType: got.mimeType || got.image.mimeType },
        width: got.image.width,
        height: got.image.height,
      };
      exec.step('source_loaded', 10, `Loaded source image ${got.image.id} (${got.image.width}x${got.image.height})`);
    }

    const composition = await this.deps.composer.compose({ req, plan, principal });

    // SPEC 4.1 rule 3: request, then scene/style/character (composition), then the edit source's shape, then 1:1.
    const sizeDims = plan.size && plan.size !== 'auto' ? parseSize(plan.size) : undefined;
    const aspectRatio =
      plan.aspectRatio ??
      composition.aspectRatio ??
      (sizeDims ? ratioOfSize(sizeDims.width, sizeDims.height) : undefined) ??
      (source ? closestRatio(source.width, source.height) : undefined) ??
      '1:1';

    const model = plan.model;
    const maps = { provA: this.deps.config.provAModelMap, provB: this.deps.config.provBModelMap };
    const providerReq: ProviderRequest = {
      model: upstreamModel(model, maps),
      prompt: upstreamPrompt(composition.prompt, composition.negativePrompt),
      systemInstruction: composition.systemInstruction,
      images: [...(source ? [source.image] : []), ...composition.referenceImages],
      n: plan.n,
      aspectRatio,
      tier: plan.tier,
      search: plan.search,
      thinking: plan.thinking,
      size: undefined,
      quality: plan.quality,
      outputFormat: model.provider === 'provB' ? plan.outputFormat : undefined,
      outputCompression: plan.outputCompression,
      background: plan.background,
      moderation: plan.moderation,
    };
    if (model.provider === 'provB') {
      const ratioGiven = plan.aspectRatio ?? composition.aspectRatio ?? source;
      providerReq.size = sizeDims
        ? plan.size
        : plan.size === 'auto' && !ratioGiven
          ? 'auto'
          : (PROVB_SIZE_FOR_RATIO[aspectRatio] ?? '1024x1024');
    }

    const keys = prepared.keys;
    exec.log(
      `Calling ${model.provider} (${providerReq.model}): ${plan.n} image(s), aspect ratio ${aspectRatio}${providerReq.tier ? `, tier ${providerReq.tier}` : ''}${providerReq.size ? `, size ${providerReq.size}` : ''}${providerReq.images.length ? `, ${providerReq.images.length} input image(s)` : ''}`,
      { step: 'calling_provider', progress: 20 },
    );
    const client = this.deps.providers[model.provider];
    const attemptLog = (message: string, level: 'info' | 'warn' | 'error' = 'info') => exec.log(message, { level });
    const results: ProviderResult[] = [];
    let firstError: unknown;
    if (model.provider === 'provA') {
      // One picture per generateContent call: n calls side by side.
      const settled = await Promise.allSettled(
        Array.from({ length: plan.n }, () => client.generate(tenantId, keys, { ...providerReq, n: 1 }, attemptLog, cancel)),
      );
      for (const s of settled) {
        if (s.status === 'fulfilled') results.push(s.value);
        else {
          firstError ??= s.reason;
          exec.log(`One image failed: ${isAppError(s.reason) ? s.reason.body.error : 'internal error'}`, { level: 'warn' });
        }
      }
    } else {
      results.push(await client.generate(tenantId, keys, providerReq, attemptLog, cancel));
    }
    const raw = results.flatMap((r) => r.images).slice(0, plan.n);
    if (raw.length === 0) throw firstError ?? new AppError(502, { error: 'Image generation failed: the provider returned no image' });
    const tokens = results.reduce((a, r) => a + r.tokens, 0);

    const produced: Produced[] = [];
    for (const img of raw) {
      // The header the image guard read (ProviderClient.checkResult); read here only when none came along.
      const meta =
        img.header ??
        (await sharp(img.data)
          .metadata()
          .catch(() => undefined));
      if (!meta?.width || !meta.height || !meta.format)
        throw new AppError(502, { error: 'Image generation failed: the provider returned data that is not an image' });
      const mimeType = meta.format === 'jpeg' ? 'image/jpeg' : `image/${meta.format}`;
      produced.push({ data: img.data, mimeType, width: meta.width, height: meta.height });
    }
    exec.step('storing', 80, `Received ${produced.length} image(s) from ${model.provider}; checking the quota and storing`);

    const incoming = produced.reduce((a, x) => a + x.data.length, 0);
    // The quota is checked while the pictures are stored: they are stored pending (neither listed nor billed
    // until the execution completes), so a refusal fails the execution and its pending images are discarded,
    // and the thumbnails render during the check instead of after it.
    const quotaCheck = collaborators.checkQuota(principal, tenantId, incoming);
    quotaCheck.catch(() => {}); // awaited below, once the stores have settled

    const perImageTokens = Math.round(tokens / produced.length);
    const operation = source ? 'edit' : 'generate';
    // Each picture is stored on its own: when some stores fail (e.g. the session filled up meanwhile) the
    // others are already in the library, so they are reported (generated < requested) rather than hidden
    // behind an error; only when none was stored does the call fail.
    const storing = Promise.allSettled(
      produced.map((x) =>
        collaborators.storeImage(principal, {
          tenantId,
          sessionId,
          data: x.data,
          mimeType: x.mimeType,
          prompt: composition.prompt,
          negativePrompt: composition.negativePrompt,
          operation,
          aspectRatio: model.provider === 'provB' ? ratioOfSize(x.width, x.height) : aspectRatio,
          modelId: model.id,
          resolutionTier: model.provider === 'provA' ? (plan.tier ?? '1k') : tierOf(x.width, x.height),
          parentImageId: source?.id,
          stylePresetId: composition.stylePresetId,
          productReferenceId: composition.productReferenceId,
          characterId: composition.characterId,
          referenceGroupIds: composition.referenceGroupIds,
          isReference: false,
          executionId: exec.executionId,
          hasSynthid: model.provider === 'provA',
          keyType: principal.keyType ?? 'live',
          tokens: perImageTokens,
          pending: true,
          // Content Credentials (issue 39): the library signs the picture, naming these as its ingredients.
          referenceObjectKeys: composition.referenceObjectKeys ?? [],
          credentialsIncludePrompt: plan.credentialsIncludePrompt ?? false,
        }),
      ),
    );
    // Both settle before either outcome is acted on: the execution fails only once no store is in flight.
    const [quotaR, settledStores] = await Promise.all([
      quotaCheck.then(
        (q) => ({ ok: true as const, allowed: q.allowed }),
        (err: unknown) => ({ ok: false as const, err }),
      ),
      storing,
    ]);
    if (!quotaR.ok) throw quotaR.err;
    if (!quotaR.allowed) throw quotaExceeded();
    const stored: ImageRecord[] = [];
    let storeError: unknown;
    for (const r of settledStores) {
      if (r.status === 'fulfilled') stored.push(r.value);
      else {
        storeError ??= r.reason;
        exec.log(`One image could not be stored: ${isAppError(r.reason) ? r.reason.body.error : 'internal error'}`, { level: 'warn' });
      }
    }
    if (stored.length === 0) throw storeError;
    const records = stored.sort((a, b) => a.id - b.id);
    const summary = `${operation === 'edit' ? 'Edited' : 'Generated'} ${records.length} of ${plan.n} image(s) with ${model.id}: ${records.map((r) => r.id).join(', ')}`;
    await this.completeWithImages(
      exec,
      principal,
      { message: `Completed: ${summary}`, summary, imageIds: records.map((r) => r.id), requested: plan.n },
      signal,
    );
    if (composition.afterSuccess) {
      await composition.afterSuccess().catch((err) => this.deps.logger.warn({ err }, 'afterSuccess hook failed'));
    }
    return records.map(toGeneratedImage);
  }
}
