import { type Clients, type GenerationJob, runGenerationJob, submitGenerationJob } from '@imagegen/operations';
import type { FastifyReply, FastifyRequest } from 'fastify';

/** Whether the request asks to be answered before the work is done: `Prefer: respond-async` (RFC 7240). */
export function prefersAsync(prefer: string | string[] | undefined): boolean {
  const values = Array.isArray(prefer) ? prefer : prefer ? [prefer] : [];
  return values.some((v) => v.split(',').some((p) => p.split(';')[0].trim().toLowerCase() === 'respond-async'));
}

/**
 * The answer of an operation that generates (issue 37): with `Prefer: respond-async`, 202 with the queued job
 * (Location: its execution, Preference-Applied: respond-async); otherwise its images, once made, as the SPEC says.
 * Both run the same request through the generation service's job of that execution.
 */
export async function answerGeneration(
  req: FastifyRequest,
  reply: FastifyReply,
  clients: Pick<Clients, 'generation' | 'generating' | 'library'>,
  job: GenerationJob,
): Promise<unknown> {
  if (!prefersAsync(req.headers.prefer)) return runGenerationJob(clients, req.principal, job);
  const data = await submitGenerationJob(clients, req.principal, job);
  reply.status(202).header('location', data.statusUrl).header('preference-applied', 'respond-async');
  return { data };
}
