import type {
  EditImageRequest,
  Execution,
  GenerateImagesRequest,
  GenerateImagesResponse,
} from '@imagegen/contracts/generation/v1/generation';
import type { ImageRecord, LibraryServiceService } from '@imagegen/contracts/library/v1/library';
import type { Client, Principal } from '@imagegen/platform';
import type { Clients } from './clients.js';
import { GENERATE_DEADLINE_MS, generatedAnswer } from './generation-calls.js';
import { characterImageJson, editImageJson, generateResultJson, multiCharacterImageJson, productImagesJson } from './present.js';

/**
 * The answers of the operations that generate (issue 37): one presenter per operation, for its synchronous answer
 * and for the result of the same request run as an async job (GET /api/executions/:executionId, the stream's
 * `complete`), so both forms come from one place. `presentation` is what the answer needs besides the images (the
 * character's name, the edited image's id), kept with a job when it is submitted.
 */
export interface JobPresentations {
  'POST /api/images': Record<string, never>;
  'POST /api/edit-image': { imageId: number };
  'POST /api/characters/:identifier/generate': { characterName: string };
  'POST /api/characters/generate-multi': { characterCount: number };
  'POST /api/products/:identifier/generate': { productId: number; productName: string; scenePrompt?: string };
}
export type JobOperation = keyof JobPresentations;

type Presenter<O extends JobOperation> = (res: GenerateImagesResponse, p: JobPresentations[O], records: ImageRecord[]) => unknown;

const PRESENTERS: { [O in JobOperation]: Presenter<O> } = {
  'POST /api/images': (res) => ({ data: generateResultJson(res) }),
  'POST /api/edit-image': (res, p) =>
    editImageJson({ image: res.images[0], sessionId: res.sessionId, executionId: res.executionId }, p.imageId),
  'POST /api/characters/:identifier/generate': (res, p, records) => ({
    data: characterImageJson(res, p.characterName, records.find((r) => r.id === res.images[0].recordId)?.thumbnailSizeBytes ?? 0),
  }),
  'POST /api/characters/generate-multi': (res, p) => ({ data: multiCharacterImageJson(res, p.characterCount) }),
  'POST /api/products/:identifier/generate': (res, p) => ({
    data: productImagesJson(res, { id: p.productId, productName: p.productName } as Parameters<typeof productImagesJson>[1], p.scenePrompt),
  }),
};

export const isJobOperation = (operation: string): operation is JobOperation => Object.hasOwn(PRESENTERS, operation);

/**
 * The answer of a generating operation. `records`: the library records of its images, when the answer needs more
 * than GeneratedImage carries (a character's thumbnail size); `libraryRecords` fetches them.
 */
export function presentGeneration<O extends JobOperation>(
  operation: O,
  res: GenerateImagesResponse,
  presentation: JobPresentations[O],
  records: ImageRecord[] = [],
): unknown {
  return (PRESENTERS[operation] as Presenter<O>)(res, presentation, records);
}

/** Whether the operation's answer needs the library records of its images (presentGeneration's `records`). */
export const needsRecords = (operation: JobOperation) => operation === 'POST /api/characters/:identifier/generate';

/**
 * The result of a completed execution submitted as a job (its operation's synchronous answer), built from its
 * images as the library lists them; undefined for any other execution, or one whose images are no longer all listed
 * (deleted since).
 */
export async function jobResult(
  e: Execution,
  library: Pick<Client<typeof LibraryServiceService>, 'resolveImages' | 'commitExecutionImages'>,
  principal: Principal,
): Promise<unknown | undefined> {
  if (e.status !== 'completed' || !isJobOperation(e.operation)) return undefined;
  const images = await completedImages(e, library, principal);
  return images && presentGeneration(e.operation, generatedAnswer(e, images), JSON.parse(e.presentation || '{}'), images);
}

/**
 * The images a completed execution reported, in its order, as the library lists them; undefined when it reported
 * none (or is not completed) or some were deleted since. Completed a moment ago, its images may not be listed yet
 * (the process that ran it, or the library's ExecutionFinished consumer, lists them right after the completion is
 * written): they are the caller's, so acknowledging the completion here lists them now (idempotent), and a reader
 * never sees a completed execution without its images.
 */
export async function completedImages(
  e: Execution,
  library: Pick<Client<typeof LibraryServiceService>, 'resolveImages' | 'commitExecutionImages'>,
  principal: Principal,
): Promise<ImageRecord[] | undefined> {
  if (e.status !== 'completed' || e.imageIds.length === 0) return undefined;
  let r = await library.resolveImages({ imageIds: e.imageIds }, principal);
  if (r.missingIds.length > 0) {
    await library.commitExecutionImages({ tenantId: '', executionId: e.executionId, imageIds: e.imageIds }, principal);
    r = await library.resolveImages({ imageIds: e.imageIds }, principal);
  }
  return r.missingIds.length > 0 ? undefined : r.images;
}

/** A generating operation's request: a generate (or an edit) and what its answer needs besides the images. */
export type GenerationJob<O extends JobOperation = JobOperation> = {
  operation: O;
  presentation: JobPresentations[O];
} & ({ generate: GenerateImagesRequest; edit?: undefined } | { edit: EditImageRequest; generate?: undefined });

/** What an async submit answers (202, JobAccepted): the queued job and where to follow, and cancel, it. */
export async function submitGenerationJob(clients: Pick<Clients, 'generation'>, principal: Principal, job: GenerationJob) {
  const r = await clients.generation.submitJob(
    { generate: job.generate, edit: job.edit, operation: job.operation, presentation: JSON.stringify(job.presentation) },
    principal,
  );
  const statusUrl = `/api/executions/${r.executionId}`;
  return {
    executionId: r.executionId,
    status: 'queued' as const,
    position: r.position,
    statusUrl,
    streamUrl: `${statusUrl}/stream`,
    cancelUrl: `${statusUrl}/cancel`,
  };
}

/** Runs the operation and waits for its images (the synchronous form); its answer. */
export async function runGenerationJob<O extends JobOperation>(
  clients: Pick<Clients, 'generating' | 'library'>,
  principal: Principal,
  job: GenerationJob<O>,
): Promise<unknown> {
  const opts = { timeoutMs: GENERATE_DEADLINE_MS };
  let res: GenerateImagesResponse;
  if (job.edit) {
    const r = await clients.generating.editImage(job.edit, principal, opts);
    res = { images: r.image ? [r.image] : [], requested: 1, generated: 1, sessionId: r.sessionId, executionId: r.executionId };
  } else res = await clients.generating.generateImages(job.generate as GenerateImagesRequest, principal, opts);
  const records = needsRecords(job.operation)
    ? (await clients.library.resolveImages({ imageIds: res.images.map((i) => i.recordId) }, principal)).images
    : [];
  return presentGeneration(job.operation, res, job.presentation, records);
}
