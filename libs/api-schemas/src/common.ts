import { z } from 'zod';

/** SPEC 7: every error answer, `{error, details?}`; `code` carries a machine code, `requestId` a 500's id. */
export const ErrorBody = z
  .object({
    error: z.string(),
    details: z.union([z.array(z.unknown()), z.record(z.unknown())]).optional(),
    code: z.string().optional(),
    requestId: z.string().optional(),
  })
  .describe('Error envelope');

/** 402: the monthly storage quota is used up. */
export const QuotaExceeded = z
  .object({ error: z.literal('Monthly storage quota exceeded'), code: z.literal('QUOTA_EXCEEDED') })
  .describe('Monthly storage quota exceeded');

/**
 * 429: a rate limit is exhausted, or a per-tenant cap on concurrent streams or generations is reached (those
 * say which in `details`); `retryAfter` is also sent as the Retry-After header.
 */
export const RateLimited = z
  .object({
    error: z.string().describe('Rate limit exceeded. Try again in <n> seconds.'),
    details: ErrorBody.shape.details,
    retryAfter: z.number().int().min(1),
  })
  .describe('Rate limit exceeded');

/** `{data: {deleted: true}}` of the simple deletes. */
export const Deleted = z.object({ deleted: z.literal(true) });

export const Success = z.object({ success: z.literal(true) });

/** `{data: T}`: the envelope of most answers (SPEC general convention 2). */
export const data = <T extends z.ZodTypeAny>(t: T) => z.object({ data: t });

export const OffsetPagination = z.object({ total: z.number().int(), limit: z.number().int(), offset: z.number().int() });
/** pagination.nextCursor of the keyset-paged asset lists. */
const nextCursor = z.string().nullable().describe('pass as cursor to continue after this page; null on the last page');
/** The style preset list's: OffsetPagination and nextCursor (OffsetPagination itself stays as other lists use it). */
export const StylePresetPagination = OffsetPagination.extend({ nextCursor });
export const AssetPagination = OffsetPagination.extend({ hasMore: z.boolean(), nextCursor });
export const PagePagination = z.object({
  page: z.number().int(),
  pageSize: z.number().int(),
  total: z.number().int(),
  hasMore: z.boolean(),
  nextCursor,
});
