/**
 * One error type for every service. `status` is the HTTP status of SPEC section 7 and `body` is the
 * exact response body ({error, details?, ...}). gRPC carries it across services (see grpc.ts) and the
 * gateway writes it out unchanged.
 */
export interface ErrorBody {
  error: string;
  details?: unknown;
  [extra: string]: unknown;
}

export class AppError extends Error {
  readonly status: number;
  readonly body: ErrorBody;
  /** Extra HTTP headers the gateway must send (e.g. Retry-After). */
  readonly headers: Record<string, string>;

  constructor(status: number, body: ErrorBody | string, headers: Record<string, string> = {}) {
    const b = typeof body === 'string' ? { error: body } : body;
    super(b.error);
    this.name = 'AppError';
    this.status = status;
    this.body = b;
    this.headers = headers;
  }
}

export const badRequest = (error: string, details?: unknown) => new AppError(400, details === undefined ? { error } : { error, details });
export const invalidPayload = (details: string[]) => badRequest('Invalid request payload', details);
export const unauthorized = (error = 'Invalid or missing API key') => new AppError(401, { error });
export const forbidden = (error: string) => new AppError(403, { error });
export const notFound = (error: string) => new AppError(404, { error });
export const conflict = (error: string, details?: unknown) => new AppError(409, details === undefined ? { error } : { error, details });
export const quotaExceeded = () => new AppError(402, { error: 'Monthly storage quota exceeded', code: 'QUOTA_EXCEEDED' });
export const unavailable = (error = 'Service temporarily unavailable') => new AppError(503, { error });

export function isAppError(e: unknown): e is AppError {
  return e instanceof AppError;
}
