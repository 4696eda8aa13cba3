import { randomUUID } from 'node:crypto';
import type {
  EditImageRequest,
  EditImageResponse,
  Execution,
  GeneratedImage,
  GenerateImagesRequest,
  GenerateImagesResponse,
  GenerationServiceService,
  UploadForEditingRequest,
  UploadForEditingResponse,
} from '@imagegen/contracts/generation/v1/generation';
import type { ImageRecord, LibraryServiceService } from '@imagegen/contracts/library/v1/library';
import { AppError, answerLost, type CallOptions, type Client, durationFromEnv, type Principal, reachedNoReplica } from '@imagegen/platform';
import type { Logger } from 'pino';

/**
 * GenerateImages, EditImage and UploadForEditing as every caller that waits for their answer makes them (the
 * gateway's routes, the MCP tools): each call names its execution (execution_id, a fresh UUID unless the caller
 * chose one), so that when the answer is lost on the way (answerLost: the generation replica died, or its connection
 * dropped, after the call reached it) the caller answers from the execution's recorded outcome, not from the
 * process that ran it (issue 35):
 * - completed: the answer is rebuilt from it (the images it reported) exactly as a success answers, once every one
 *   of them is listed (so billed). The caller acknowledges the completion to the library (CommitExecutionImages
 *   with the execution's image ids: what the dead replica did not get to do; idempotent, and what the library's
 *   ExecutionFinished consumer does too) until every image is listed, for as long as the call may last;
 * - failed, or unknown (the call never created it): the call's own error stands (503 + Retry-After), and by the
 *   billing rule nothing is billed;
 * - not readable (no generation replica answers yet: the one that died is restarting): read again for as long as
 *   the call may last, since only a replica can tell whether it completed;
 * - running (the replica died mid-work): read again until it is decided, for at most RECOVERY_WAIT_MS, which covers
 *   the liveness reaper (a dead replica's running executions are failed once its heartbeat is
 *   EXECUTION_DEAD_AFTER_MS old, checked every EXECUTION_REAPER_MS). Past it, the error stands.
 */
export interface GenerationCalls {
  generateImages(req: GenerateImagesRequest, principal: Principal, opts?: CallOptions): Promise<GenerateImagesResponse>;
  editImage(req: EditImageRequest, principal: Principal, opts?: CallOptions): Promise<EditImageResponse>;
  uploadForEditing(req: UploadForEditingRequest, principal: Principal, opts?: CallOptions): Promise<UploadForEditingResponse>;
}

/**
 * How long a lost answer's execution is read again while it is running, before the call's error stands
 * (GENERATION_RECOVERY_WAIT_MS): by default the liveness reaper's longest time to fail a dead replica's
 * executions (EXECUTION_DEAD_AFTER_MS + 2 x EXECUTION_REAPER_MS, the same settings generation reads) and 5 s more.
 */
export const RECOVERY_WAIT_MS = durationFromEnv(
  'GENERATION_RECOVERY_WAIT_MS',
  durationFromEnv('EXECUTION_DEAD_AFTER_MS', 30_000) + 2 * durationFromEnv('EXECUTION_REAPER_MS', 10_000) + 5000,
);
/**
 * The deadline of a call that sets none: as long as a generation may take (provB's upstream allows 240 s, then the
 * images are stored), not the clients' 30 s default, which cut slow character and product generations short.
 */
export const GENERATE_DEADLINE_MS = 330_000;
/**
 * The deadline of an UploadForEditing call that sets none: the service's fetch of the URL (UPLOAD_FETCH_TIMEOUT_MS,
 * 30 s by default), then the checks and the store, with room to spare.
 */
export const UPLOAD_DEADLINE_MS = 90_000;
const POLL_MS = 200;
/** Deadline of each look-up call of a recovery (GetExecution, ResolveImages, CommitExecutionImages). */
const LOOKUP_TIMEOUT_MS = 5000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The deadline of one look-up call of a recovery that must end by `until` (at most LOOKUP_TIMEOUT_MS). */
const lookupTimeout = (until: number) => Math.max(1, Math.min(LOOKUP_TIMEOUT_MS, until - Date.now()));

/** The GeneratedImage of a library record: what GenerateImages answers for each image it stored. */
export function toGeneratedImage(r: ImageRecord): GeneratedImage {
  return {
    recordId: r.id,
    fullUrl: r.fullUrl,
    thumbnailUrl: r.thumbnailUrl,
    width: r.width,
    height: r.height,
    sizeBytes: r.sizeBytes,
    format: r.format,
    prompt: r.prompt,
    negativePrompt: r.negativePrompt,
    hasSynthid: r.hasSynthid,
    createdAt: r.createdAt,
    mimeType: r.mimeType,
    objectKey: r.objectKey,
    parentImageId: r.parentImageId,
    aspectRatio: r.aspectRatio,
    modelId: r.modelId,
    resolutionTier: r.resolutionTier,
    sessionId: r.sessionId,
    thumbnailKey: r.thumbnailKey,
  };
}

/**
 * What UploadForEditing answers for the image it stored (`r`, as StoreImage or ResolveImages returns it) in the
 * execution `executionId` of session `sessionId`: the one builder of that answer, for the service's success and a
 * caller's recovery alike.
 */
export function uploadForEditingAnswer(r: ImageRecord, sessionId: string, executionId: string): UploadForEditingResponse {
  return {
    imageId: r.id,
    objectKey: r.objectKey,
    publicUrl: r.fullUrl,
    sizeBytes: r.sizeBytes,
    mimeType: r.mimeType,
    message: `Image uploaded successfully. Use image_id ${r.id} with POST /api/edit-image to edit it.`,
    width: r.width,
    height: r.height,
    thumbnailUrl: r.thumbnailUrl,
    sessionId,
    executionId,
  };
}

/** What GenerateImages answers for a completed execution `e` whose images are `images` (its order). */
export function generatedAnswer(e: Execution, images: ImageRecord[]): GenerateImagesResponse {
  return {
    images: images.map(toGeneratedImage),
    requested: e.imagesRequested || images.length,
    generated: images.length,
    sessionId: e.sessionId,
    executionId: e.executionId,
  };
}

/** A completed execution whose images are all listed: what a lost answer is rebuilt from. */
interface Completed {
  execution: Execution;
  images: ImageRecord[];
}

export function generationCalls(deps: {
  generation: Pick<Client<typeof GenerationServiceService>, 'generateImages' | 'editImage' | 'uploadForEditing' | 'getExecution'>;
  library: Pick<Client<typeof LibraryServiceService>, 'resolveImages' | 'commitExecutionImages'>;
  logger?: Logger;
  /** Tests: RECOVERY_WAIT_MS. */
  waits?: { recoveryWaitMs?: number };
}): GenerationCalls {
  const recoveryWaitMs = deps.waits?.recoveryWaitMs ?? RECOVERY_WAIT_MS;
  /**
   * The call with its execution named (the caller's id, or a new one) and its deadline (the caller's, or
   * `deadlineMs`); on a lost answer, the answer rebuilt from a completed execution.
   */
  async function call<R extends { executionId?: string }, T>(
    req: R,
    principal: Principal,
    callOpts: CallOptions | undefined,
    deadlineMs: number,
    run: (req: R, opts: CallOptions) => Promise<T>,
    answer: (done: Completed) => T,
  ): Promise<T> {
    const executionId = req.executionId || randomUUID();
    const opts: CallOptions = { ...callOpts, timeoutMs: callOpts?.timeoutMs ?? deadlineMs };
    const callEnds = Date.now() + (opts.timeoutMs as number);
    try {
      return await run({ ...req, executionId }, opts);
    } catch (err) {
      // A call that reached no replica started nothing: its 503 stands at once (a generation service that is down
      // answers fast, ARCHITECTURE rule 8).
      if (!answerLost(err) || reachedNoReplica(err) || opts.signal?.aborted) throw err;
      const recovered = await recover(executionId, principal, err as AppError, callEnds, opts.signal);
      if (!recovered) throw err;
      return answer(recovered);
    }
  }

  async function recover(
    executionId: string,
    principal: Principal,
    lost: AppError,
    callEnds: number,
    signal?: AbortSignal,
  ): Promise<Completed | undefined> {
    const log = deps.logger?.child({ executionId, requestId: principal.requestId });
    const e = await outcome(executionId, principal, callEnds, signal);
    if (e === 'unreadable' || e?.status !== 'completed' || e.imageIds.length === 0) {
      const status = e === 'unreadable' ? 'unreadable' : (e?.status ?? 'none');
      log?.warn({ status, error: lost.body.error }, 'generation answer lost; the execution did not complete');
      return undefined;
    }
    // Decided and billed: its images are listed as soon as the library can (a database away makes that wait), and
    // the answer waits for them as long as the call may last (a 503 would be billed, see completeWithImages).
    const images = await listedImages(e, principal, callEnds, signal);
    if (!images) {
      log?.warn({ images: e.imageIds }, 'generation answer lost; the completed execution images were not listed in time');
      return undefined;
    }
    // warn: a generation replica went away in the middle of a call (the answer itself is whole).
    log?.warn({ images: e.imageIds }, 'generation answer lost; answered from its completed execution');
    return { execution: e, images };
  }

  /**
   * The execution once decided (completed or failed; undefined: the call never created it). While no replica can
   * read it (the dead one restarting, its database away) it is read again until `callEnds`: it may have completed,
   * and only a replica can tell. Once readable and running, it is read again for RECOVERY_WAIT_MS (the reaper's
   * time to fail a dead replica's executions). Answers 'running' or 'unreadable' when its bound came first.
   */
  async function outcome(
    executionId: string,
    principal: Principal,
    callEnds: number,
    signal?: AbortSignal,
  ): Promise<Execution | undefined | 'unreadable'> {
    let last: Execution | 'unreadable' = 'unreadable';
    /** Set when it is first read running: the reaper's bound starts then. */
    let runningUntil: number | undefined;
    const until = () => Math.min(callEnds, runningUntil ?? callEnds);
    for (;;) {
      try {
        last = await deps.generation.getExecution({ executionId, includeLogs: false }, principal, { timeoutMs: lookupTimeout(until()) });
        if (last.status !== 'running') return last;
        runningUntil ??= Date.now() + recoveryWaitMs;
      } catch (err) {
        if (err instanceof AppError && err.status === 404) return undefined;
        // Any other failure is the look-up's, not the execution's (the replica restarting, its database away).
      }
      if (Date.now() + POLL_MS >= until() || signal?.aborted) return last;
      await sleep(POLL_MS);
    }
  }

  /**
   * The execution's reported images once all are listed (in its order), acknowledging the completion until it is;
   * undefined past `until` or once the caller cancelled.
   */
  async function listedImages(e: Execution, principal: Principal, until: number, signal?: AbortSignal): Promise<ImageRecord[] | undefined> {
    for (;;) {
      const timeoutMs = lookupTimeout(until);
      try {
        const r = await deps.library.resolveImages({ imageIds: e.imageIds }, principal, { timeoutMs });
        if (r.missingIds.length === 0) return r.images;
        // The tenant is the principal's (an empty tenant_id means it).
        await deps.library.commitExecutionImages({ tenantId: '', executionId: e.executionId, imageIds: e.imageIds }, principal, {
          timeoutMs,
        });
        continue;
      } catch (err) {
        deps.logger?.warn({ err, executionId: e.executionId }, 'could not commit the images of a completed execution yet; retrying');
      }
      if (Date.now() + POLL_MS >= until || signal?.aborted) return undefined;
      await sleep(POLL_MS);
    }
  }

  return {
    generateImages: (req, principal, opts) =>
      call(
        req,
        principal,
        opts,
        GENERATE_DEADLINE_MS,
        (r, o) => deps.generation.generateImages(r, principal, o),
        ({ execution, images }) => generatedAnswer(execution, images),
      ),
    editImage: (req, principal, opts) =>
      call(
        req,
        principal,
        opts,
        GENERATE_DEADLINE_MS,
        (r, o) => deps.generation.editImage(r, principal, o),
        ({ execution, images }): EditImageResponse => ({
          image: toGeneratedImage(images[0]),
          sessionId: execution.sessionId,
          executionId: execution.executionId,
        }),
      ),
    // One image per upload (its execution reports exactly the one it stored).
    uploadForEditing: (req, principal, opts) =>
      call(
        req,
        principal,
        opts,
        UPLOAD_DEADLINE_MS,
        (r, o) => deps.generation.uploadForEditing(r, principal, o),
        ({ execution, images }) => uploadForEditingAnswer(images[0], execution.sessionId, execution.executionId),
      ),
  };
}
