import { randomUUID } from 'node:crypto';
import { FILE_NAME_MAX, IMAGES_PER_SESSION_MAX, UPLOAD_MIME_TYPES, UPLOAD_URL_MAX } from '@imagegen/api-schemas/vocab';
import type { UploadForEditingRequest, UploadForEditingResponse } from '@imagegen/contracts/generation/v1/generation';
import { uploadForEditingAnswer } from '@imagegen/operations';
import { badRequest, guardImage, invalidPayload, type Principal, quotaExceeded, SafeFetchError, safeFetch } from '@imagegen/platform';
import { ratioOfSize, tierOf } from './models.js';
import type { PipelineDeps } from './pipeline.js';
import { type GenerationPipeline, requireTenant } from './pipeline.js';
import { sessionIdProblem } from './validate.js';

/** The types mime_type takes, and image/jpg (a common spelling of image/jpeg). */
const ALLOWED_MIME: readonly string[] = [...UPLOAD_MIME_TYPES, 'image/jpg'];

/** The last path segment of a URL, percent-decoded when it decodes (a malformed escape is kept as is). */
export function fileNameOf(url: string): string {
  const last = new URL(url).pathname.split('/').pop() || '';
  try {
    return decodeURIComponent(last);
  } catch {
    return last;
  }
}

const mb = (bytes: number) => `${Math.round(bytes / (1024 * 1024))} MB`;

export function validateUpload(req: UploadForEditingRequest, headerSessionId?: string): { url: string; sessionId?: string } {
  const d: string[] = [];
  let url = '';
  if (req.imageUrl === undefined || req.imageUrl === null) d.push('image_url is required');
  else if (req.imageUrl.trim() === '') d.push('image_url cannot be empty');
  else if (req.imageUrl.length > UPLOAD_URL_MAX) d.push(`image_url must be at most ${UPLOAD_URL_MAX} characters`);
  else {
    url = req.imageUrl.trim();
    let parsed: URL | undefined;
    try {
      parsed = new URL(url);
    } catch {}
    if (!parsed || !['http:', 'https:'].includes(parsed.protocol)) d.push('image_url must be a valid HTTP or HTTPS URL');
  }
  if (req.fileName !== undefined && req.fileName.length > FILE_NAME_MAX) d.push(`file_name must be at most ${FILE_NAME_MAX} characters`);
  if (req.mimeType !== undefined && !ALLOWED_MIME.includes(req.mimeType.toLowerCase())) {
    d.push(`mime_type must be one of: ${UPLOAD_MIME_TYPES.join(', ')}`);
  }
  let sessionId: string | undefined;
  if (req.sessionId !== undefined) {
    const p = sessionIdProblem(req.sessionId, 'session_id');
    if (p) d.push(p);
    else sessionId = req.sessionId;
  } else if (headerSessionId !== undefined) {
    const p = sessionIdProblem(headerSessionId, 'X-Session-Id');
    if (p) d.push(p);
    else sessionId = headerSessionId;
  }
  if (d.length) throw invalidPayload(d);
  return { url, sessionId };
}

function fetchRefusal(err: SafeFetchError, settings: { uploadMaxBytes: number; uploadTimeoutMs: number }): Error {
  switch (err.reason) {
    case 'blocked_address':
      return badRequest('Image URL is not allowed: it points to a private, loopback, link-local or metadata address', [err.message]);
    case 'invalid_url':
      return badRequest('image_url must be a valid HTTP or HTTPS URL', [err.message]);
    case 'dns_failure':
      return badRequest('Failed to fetch image from URL: the host name could not be resolved');
    case 'too_large':
      return badRequest(`Image is too large: the upload limit is ${mb(settings.uploadMaxBytes)}`);
    case 'timeout':
      return badRequest(`Failed to fetch image from URL: no complete answer within ${Math.round(settings.uploadTimeoutMs / 1000)} s`);
    case 'too_many_redirects':
      return badRequest('Failed to fetch image from URL: too many redirects');
    default:
      return badRequest(`Failed to fetch image from URL: ${err.message}`);
  }
}

/**
 * POST /api/upload-for-editing: fetch a public URL server-side (safeFetch: private, loopback,
 * link-local and metadata addresses refused, also after redirects and DNS; size and time bounded),
 * check it is a PNG, JPEG, WebP or single-frame GIF of at most 4,194,304 pixels, check the quota,
 * store it with operation 'upload'. Each refusal is a 400 with its own text; the execution records it.
 */
export async function uploadForEditing(
  pipeline: GenerationPipeline,
  deps: PipelineDeps,
  req: UploadForEditingRequest,
  principal: Principal,
  signal?: AbortSignal,
): Promise<UploadForEditingResponse> {
  const tenantId = requireTenant(principal);
  const { url, sessionId: given } = validateUpload(req, principal.sessionId);
  const sessionId = given ?? randomUUID();
  const p = { ...principal, sessionId };
  const { settings, collaborators } = deps;
  const exec = await pipeline.startExecution(
    p,
    tenantId,
    sessionId,
    req.toolName || 'upload_for_editing',
    '',
    `Uploading image from ${new URL(url).host}`,
    req.executionId,
  );
  try {
    const session = await collaborators.touchSession(p, tenantId, sessionId);
    if (session.remaining < 1)
      throw badRequest(`Session ${sessionId} has reached the limit of ${IMAGES_PER_SESSION_MAX.toLocaleString('en-US')} images`);
    exec.step('fetching', 10, 'Fetching the image');
    let fetched: Awaited<ReturnType<typeof safeFetch>>;
    try {
      fetched = await safeFetch(url, {
        maxBytes: settings.uploadMaxBytes,
        timeoutMs: settings.uploadTimeoutMs,
        allowLoopback: deps.config.allowLoopbackFetch,
        headers: { accept: 'image/png,image/jpeg,image/webp,image/gif;q=0.9,*/*;q=0.1', 'user-agent': 'imagegen-upload/1.0' },
      });
    } catch (err) {
      if (err instanceof SafeFetchError) throw fetchRefusal(err, settings);
      throw err;
    }
    if (fetched.status < 200 || fetched.status >= 300) throw badRequest(`Failed to fetch image from URL: ${fetched.status}`);
    if (fetched.body.length === 0) throw badRequest('URL does not point to an image: the response is empty');
    exec.step('checking', 40, `Fetched ${fetched.body.length} bytes; checking the image`);

    // The one image guard (libs/platform/src/image-guard.ts): format, frames and pixels from the header only.
    const { width, height, mimeType } = await guardImage(fetched.body, {
      limits: { maxBytes: settings.uploadMaxBytes, maxPixels: settings.uploadMaxPixels },
      contentType: fetched.contentType,
    });
    const quota = await collaborators.checkQuota(p, tenantId, fetched.body.length);
    if (!quota.allowed) throw quotaExceeded();

    exec.step('storing', 70, 'Storing the image');
    const fileName = req.fileName?.trim() || fileNameOf(fetched.finalUrl) || 'image';
    const rec = await collaborators.storeImage(p, {
      tenantId,
      sessionId,
      data: fetched.body,
      mimeType,
      prompt: `Uploaded image: ${fileName}`.slice(0, 1000),
      operation: 'upload', // an import: kept as it came, with whatever Content Credentials it carries
      aspectRatio: ratioOfSize(width, height),
      modelId: '',
      resolutionTier: tierOf(width, height),
      referenceGroupIds: [],
      isReference: false,
      executionId: exec.executionId,
      hasSynthid: false,
      keyType: principal.keyType ?? 'live',
      tokens: 0,
      referenceObjectKeys: [],
      credentialsIncludePrompt: false,
      pending: true,
    });
    const summary = `Uploaded image ${rec.id} (${rec.width}x${rec.height}, ${rec.sizeBytes} bytes)`;
    // The completed row keeps the image id (image_ids, images_requested 1), so a caller whose answer is lost rebuilds
    // this very answer from it (libs/operations generation-calls.ts, with the same uploadForEditingAnswer).
    await pipeline.completeWithImages(exec, p, { message: `Completed: ${summary}`, summary, imageIds: [rec.id], requested: 1 }, signal);
    return uploadForEditingAnswer(rec, sessionId, exec.executionId);
  } catch (err) {
    await exec.fail(err);
    throw err;
  }
}
