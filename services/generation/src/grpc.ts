import {
  ACTIVE_EXECUTIONS_LIMIT_DEFAULT,
  ACTIVE_EXECUTIONS_LIMIT_MAX,
  SESSION_LOGS_LIMIT_DEFAULT,
  SESSION_LOGS_LIMIT_MAX,
} from '@imagegen/api-schemas/vocab';
import type { GenerationServiceService } from '@imagegen/contracts/generation/v1/generation';
import { type Handlers, invalidPayload, notFound } from '@imagegen/platform';
import { requestedExecutionId } from './executions.js';
import { cancelExecution } from './jobs/queue.js';
import { type GenerationPipeline, type PipelineDeps, requireTenant } from './pipeline.js';
import type { CircuitBreaker } from './providers/breaker.js';
import { getExecution, listActiveExecutions, listSessionExecutions } from './store.js';
import { uploadForEditing } from './upload.js';

const clampLimit = (v: number, dflt: number, max: number) => (!v || v < 1 ? dflt : Math.min(v, max));

export function generationHandlers(
  deps: PipelineDeps,
  pipeline: GenerationPipeline,
  breakers: CircuitBreaker[],
  /** Tells this process's job runner that a job was queued (it claims at once when it has room). */
  onQueued: () => void = () => {},
): Handlers<typeof GenerationServiceService> {
  return {
    generateImages: (req, { principal, signal }) => {
      requireTenant(principal);
      return pipeline.generate({ ...req, executionId: requestedExecutionId(req.executionId) }, principal, signal);
    },
    editImage: (req, { principal, signal }) => {
      requireTenant(principal);
      return pipeline.edit({ ...req, executionId: requestedExecutionId(req.executionId) }, principal, signal);
    },
    uploadForEditing: (req, { principal, signal }) => {
      requireTenant(principal);
      return uploadForEditing(pipeline, deps, { ...req, executionId: requestedExecutionId(req.executionId) }, principal, signal);
    },

    async submitJob(req, { principal }) {
      requireTenant(principal);
      const generate = req.generate ?? (req.edit ? await pipeline.editAsGenerate(req.edit, principal) : undefined);
      if (!generate) throw invalidPayload(['a generate or edit request is required']);
      const r = await pipeline.submit({ ...generate, executionId: requestedExecutionId(generate.executionId) }, principal, {
        operation: req.operation,
        presentation: req.presentation,
      });
      onQueued();
      return { executionId: r.executionId, status: 'queued', position: r.position, sessionId: r.sessionId };
    },

    async cancelExecution(req, { principal }) {
      const tenantId = requireTenant(principal);
      if (!req.executionId) throw notFound('Execution not found');
      const e = await cancelExecution(deps.sql, tenantId, req.executionId, { eventsPrefix: deps.config.eventsPrefix, outbox: deps.outbox });
      // Running here: aborted at once (another replica's runner sees the mark at its next poll).
      if (e.status === 'running') deps.cancels?.abort(req.executionId);
      return e;
    },

    async getExecution(req, { principal }) {
      const tenantId = requireTenant(principal);
      const e = req.executionId ? await getExecution(deps.sql, tenantId, req.executionId, req.includeLogs) : undefined;
      if (!e) throw notFound('Execution not found');
      return e;
    },

    async listSessionExecutions(req, { principal }) {
      const tenantId = requireTenant(principal);
      const out = await listSessionExecutions(deps.sql, tenantId, req.sessionId, {
        limit: clampLimit(req.limit, SESSION_LOGS_LIMIT_DEFAULT, SESSION_LOGS_LIMIT_MAX),
        includeLogs: req.includeLogs,
        activeOrFinishedSince: req.activeOrFinishedSince,
      });
      if (out.total === 0 && !req.activeOrFinishedSince) {
        // No executions: the session may still exist in the library (e.g. only saved-asset images).
        const exists = req.sessionId ? await deps.collaborators.sessionExists(principal, req.sessionId) : false;
        if (!exists) throw notFound('Session not found');
      }
      return out;
    },

    async listActiveExecutions(req, { principal }) {
      const tenantId = requireTenant(principal);
      return listActiveExecutions(deps.sql, tenantId, clampLimit(req.limit, ACTIVE_EXECUTIONS_LIMIT_DEFAULT, ACTIVE_EXECUTIONS_LIMIT_MAX));
    },

    async getProviderStatus() {
      return { providers: breakers.map((b) => b.status()) };
    },
  };
}
