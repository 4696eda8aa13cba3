import type { FastifySchemaValidationError } from 'fastify/types/schema.js';

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
        msg = `${path || part} must be one of: ${(params.allowedValues as unknown[]).join(', ')}`;
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
