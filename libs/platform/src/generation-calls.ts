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
import type { Logger } from 'pino';
import { AppError } from './errors.js';
import { answerLost, type CallOptions, type Client, type Principal } from './grpc.js';

/**
 * GenerateImages, EditImage and UploadForEditing as every caller that waits for their answer makes them (the
 * gateway's routes, the MCP tools): each call names its execution (execution_id, a fresh UUID unless the caller
 * chose one), so that when the answer is lost on the way (answerLost: the generation replica died, or its connection
 * dropped, after the call reached it) the caller asks another replica what became of that execution:
 * - completed: the answer is rebuilt from it (the images it reported, which are listed and billed by then or
 *   moments later) exactly as a success answers, and the caller is told 200 with those images. The caller first
 *   acknowledges the completion to the library (CommitExecutionImages with the execution's image ids: what the dead
 *   replica did not get to do; idempotent, and what the library's ExecutionFinished consumer does too), then waits
 *   (bounded, COMMIT_WAIT_MS) until every image is listed;
 * - running (the replica died mid-work: its reaper fails it), failed, unknown (the call never created it), or the
 *   look-up fails: the call's own error stands (503 + Retry-After), and by the billing rule nothing is billed.
 * An execution still running is read again for RUNNING_SETTLE_MS: a dying replica's last write ('completed') may
 * land in PostgreSQL just after the connection to the caller dropped.
 */
export interface GenerationCalls {
  generateImages(req: GenerateImagesRequest, principal: Principal, opts?: CallOptions): Promise<GenerateImagesResponse>;
  editImage(req: EditImageRequest, principal: Principal, opts?: CallOptions): Promise<EditImageResponse>;
  uploadForEditing(req: UploadForEditingRequest, principal: Principal, opts?: CallOptions): Promise<UploadForEditingResponse>;
}

/** How long an execution found running is read again before the call's error stands. */
export const RUNNING_SETTLE_MS = 1000;
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
/** How long a completed execution's images may take to be listed (the library commits them) before the error stands. */
export const COMMIT_WAIT_MS = 5000;
const POLL_MS = 100;
/** Deadline of each look-up call of a recovery (GetExecution, ResolveImages, CommitExecutionImages). */
const LOOKUP_TIMEOUT_MS = 5000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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
function generatedAnswer(e: Execution, images: ImageRecord[]): GenerateImagesResponse {
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
  /** Tests: RUNNING_SETTLE_MS and COMMIT_WAIT_MS. */
  waits?: { runningSettleMs?: number; commitWaitMs?: number };
}): GenerationCalls {
  const runningSettleMs = deps.waits?.runningSettleMs ?? RUNNING_SETTLE_MS;
  const commitWaitMs = deps.waits?.commitWaitMs ?? COMMIT_WAIT_MS;
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
    try {
      return await run({ ...req, executionId }, opts);
    } catch (err) {
      if (!answerLost(err) || opts.signal?.aborted) throw err;
      const recovered = await recover(executionId, principal, err as AppError);
      if (!recovered) throw err;
      return answer(recovered);
    }
  }

  async function recover(executionId: string, principal: Principal, lost: AppError): Promise<Completed | undefined> {
    const log = deps.logger?.child({ executionId, requestId: principal.requestId });
    try {
      const e = await outcome(executionId, principal);
      if (e?.status !== 'completed' || e.imageIds.length === 0) {
        log?.warn({ status: e?.status ?? 'none', error: lost.body.error }, 'generation answer lost; the execution did not complete');
        return undefined;
      }
      const images = await listedImages(e, principal);
      if (!images) {
        log?.warn({ images: e.imageIds }, 'generation answer lost; the completed execution images were not listed in time');
        return undefined;
      }
      // warn: a generation replica went away in the middle of a call (the answer itself is whole).
      log?.warn({ images: e.imageIds }, 'generation answer lost; answered from its completed execution');
      return { execution: e, images };
    } catch (err) {
      log?.warn({ err, error: lost.body.error }, 'generation answer lost; its execution could not be looked up');
      return undefined;
    }
  }

  /** The execution (undefined: the call never created it), read again while it is running for RUNNING_SETTLE_MS. */
  async function outcome(executionId: string, principal: Principal): Promise<Execution | undefined> {
    const until = Date.now() + runningSettleMs;
    for (;;) {
      let e: Execution;
      try {
        e = await deps.generation.getExecution({ executionId, includeLogs: false }, principal, { timeoutMs: LOOKUP_TIMEOUT_MS });
      } catch (err) {
        if (err instanceof AppError && err.status === 404) return undefined;
        throw err;
      }
      if (e.status !== 'running' || Date.now() >= until) return e;
      await sleep(POLL_MS);
    }
  }

  /** The execution's reported images once all are listed (in its order), acknowledging the completion once; undefined past COMMIT_WAIT_MS. */
  async function listedImages(e: Execution, principal: Principal): Promise<ImageRecord[] | undefined> {
    const until = Date.now() + commitWaitMs;
    let acknowledged = false;
    for (;;) {
      const r = await deps.library.resolveImages({ imageIds: e.imageIds }, principal, { timeoutMs: LOOKUP_TIMEOUT_MS });
      if (r.missingIds.length === 0) return r.images;
      if (!acknowledged) {
        acknowledged = true;
        try {
          // The tenant is the principal's (an empty tenant_id means it).
          await deps.library.commitExecutionImages({ tenantId: '', executionId: e.executionId, imageIds: e.imageIds }, principal, {
            timeoutMs: LOOKUP_TIMEOUT_MS,
          });
          continue;
        } catch (err) {
          deps.logger?.warn(
            { err, executionId: e.executionId },
            'could not commit the images of a completed execution; waiting for the library',
          );
        }
      }
      if (Date.now() >= until) return undefined;
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
