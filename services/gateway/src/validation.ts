import { ID_MAX, INT32_MAX } from '@imagegen/api-schemas';
import type { FastifySchemaValidationError } from 'fastify/types/schema.js';

/** The JSON schema a route validates with (from the operation catalogue, @imagegen/api-schemas requests.ts). */
export { wireSchema } from '@imagegen/api-schemas';

/** Turns ajv errors into the spec's human details, e.g. 'prompt is required', 'n must be <= 4'. */
export function formatValidationErrors(errors: FastifySchemaValidationError[], part?: string): string[] {
  const out: string[] = [];
  for (const e of errors) {
    const path = (e.instancePath || '').replace(/^\//, '').replace(/\//g, '.');
    const params = e.params as Record<string, unknown>;
    let msg: string;
    switch (e.keyword) {
      case 'required':
        msg = `${path ? `${path}.` : ''}${params.missingProperty} is required`;
        break;
      case 'additionalProperties':
        msg = `${path ? `${path}.` : ''}${params.additionalProperty} is not allowed`;
        break;
      case 'enum':
        // A nullable enum lists null among its values: null is allowed, not one of the words to suggest.
        msg = `${path || part} must be one of: ${(params.allowedValues as unknown[]).filter((v) => v !== null).join(', ')}`;
        break;
      case 'type':
        msg = `${path || part} must be ${/^[aeiou]/.test(String(params.type)) ? 'an' : 'a'} ${params.type}`;
        break;
      case 'maxLength':
        msg = `${path} must be at most ${params.limit} characters`;
        break;
      case 'minLength':
        msg = Number(params.limit) === 1 ? `${path} cannot be empty` : `${path} must be at least ${params.limit} characters`;
        break;
      case 'maxItems':
        msg = `${path} must have at most ${params.limit} items`;
        break;
      case 'minItems':
        msg = `${path} must have at least ${params.limit} items`;
        break;
      case 'maximum':
        msg = `${path} must be <= ${params.limit}`;
        break;
      case 'minimum':
        msg = `${path} must be >= ${params.limit}`;
        break;
      default:
        msg = `${path || part} ${e.message ?? 'is invalid'}`;
    }
    if (!out.includes(msg)) out.push(msg);
  }
  return out;
}

// Bounds of the gRPC wire types: paging travels as int32, ids and byte sizes as int64 read back as safe
// integers. A larger value cannot be encoded (the call would answer 500), so schemas refuse it with 400.
export const INT32_MIN = -2_147_483_648;
export { ID_MAX, INT32_MAX };

/** `offset` of a paged list (int32 on the wire). */
export const offsetParam = { type: 'integer', minimum: 0, maximum: INT32_MAX, default: 0 } as const;
