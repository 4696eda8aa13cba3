import {
  ActiveExecutionsQuery,
  SessionListQuery,
  SessionLogsQuery,
  SessionParams,
  UsageQuery,
  WebhookBody,
  WebhookUpdateBody,
} from '@imagegen/api-schemas';
import { allowedModelsOf, defaultModelFor } from '@imagegen/api-schemas/vocab';
import { ListActiveExecutionsRequest, ListSessionExecutionsRequest } from '@imagegen/contracts/generation/v1/generation';
import { ListSessionsRequest } from '@imagegen/contracts/library/v1/library';
import { CreateWebhookRequest, UpdateWebhookRequest } from '@imagegen/contracts/webhooks/v1/webhooks';
import {
  completedImages,
  cursorPagination,
  executionJson,
  generatedAnswer,
  generateResultJson,
  profileJson,
  sessionImageJson,
  sessionJson,
  sessionRecordJson,
  usageJson,
  webhookCreatedJson,
  webhookJson,
} from '@imagegen/operations';
import { AppError, badRequest, MODEL_IDS } from '@imagegen/platform';
import { z } from 'zod';
import { defineTool, s, type ToolImage } from './framework.js';
import { thumbnailsOf, thumbnailsOfGenerated } from './generation-run.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** How often wait_for_execution reads the execution. */
const POLL_MS = 500;
const executionId = () => z.string().min(1).max(100).describe('Execution id (executionId of a generation result)');

// ---- sessions and executions (SPEC 4.8) ----

const listSessions = defineTool({
  name: 'list_sessions',
  description: 'List sessions, most recently active first, with image and byte totals.',
  operation: 'GET /api/sessions',
  input: SessionListQuery.shape,
  annotations: { readOnlyHint: true },
  async run(args, ctx) {
    const r = await ctx.deps.clients.library.listSessions(
      ListSessionsRequest.fromPartial({ limit: args.limit, offset: args.offset, cursor: args.cursor || undefined }),
      ctx.principal,
    );
    return { data: { data: r.sessions.map(sessionJson), pagination: cursorPagination(r) } };
  },
});

const getSession = defineTool({
  name: 'get_session',
  description: 'Get a session record and its images.',
  operation: 'GET /api/sessions/:sessionId',
  input: { session_id: SessionParams.shape.sessionId.describe('Session id') },
  annotations: { readOnlyHint: true },
  async run(args, ctx) {
    // The images as the library rendered them (as_json, the REST detail's form, kept by the library while the session
    // is unchanged): parsing that text costs less than the library reading 1,000 rows into records for this process
    // to convert. When the library answers records instead (a key that is not plain), they are converted here.
    const r = await ctx.deps.clients.library.getSession({ sessionId: args.session_id, asJson: true, sessionOnly: false }, ctx.principal);
    const images: ReturnType<typeof sessionImageJson>[] =
      r.imagesJson.length > 0 ? JSON.parse(r.imagesJson.toString('utf8')) : r.images.map(sessionImageJson);
    return { data: { data: { session: r.session ? sessionRecordJson(r.session) : null, images } } };
  },
});

const getSessionLogs = defineTool({
  name: 'get_session_logs',
  description: 'Execution logs of a session (newest first), each with its log entries.',
  operation: 'GET /api/sessions/:sessionId/logs',
  input: { session_id: SessionParams.shape.sessionId.describe('Session id'), ...SessionLogsQuery.shape },
  annotations: { readOnlyHint: true },
  async run(args, ctx) {
    const r = await ctx.deps.clients.generation.listSessionExecutions(
      ListSessionExecutionsRequest.fromPartial({ sessionId: args.session_id, limit: args.limit, includeLogs: true }),
      ctx.principal,
    );
    return {
      data: {
        success: true,
        sessionId: args.session_id,
        executions: r.executions.map((e) => executionJson(e, true)),
        total: r.total,
        totalIsExact: r.totalIsExact,
      },
    };
  },
});

const listActiveExecutions = defineTool({
  name: 'list_active_executions',
  description: 'Executions still running for this tenant.',
  operation: 'GET /api/executions/active',
  input: ActiveExecutionsQuery.shape,
  annotations: { readOnlyHint: true },
  async run(args, ctx) {
    const r = await ctx.deps.clients.generation.listActiveExecutions(
      ListActiveExecutionsRequest.fromPartial({ limit: args.limit }),
      ctx.principal,
    );
    return { data: { success: true, executions: r.executions.map((e) => executionJson(e)), total: r.total, totalIsExact: r.totalIsExact } };
  },
});

const getExecution = defineTool({
  name: 'get_execution',
  description: 'One execution with its status, progress and log entries.',
  operation: 'GET /api/executions/:executionId',
  input: { execution_id: executionId() },
  annotations: { readOnlyHint: true },
  async run(args, ctx) {
    const e = await ctx.deps.clients.generation.getExecution({ executionId: args.execution_id, includeLogs: true }, ctx.principal);
    return { data: { success: true, execution: executionJson(e, true) } };
  },
});

const waitForExecution = defineTool({
  name: 'wait_for_execution',
  description: 'Wait (up to timeout_seconds) for an execution, e.g. from generate_image async=true, and return its result.',
  scopes: [],
  anyScopes: ['sessions:read', 'images:generate', 'images:edit'],
  input: {
    execution_id: executionId(),
    timeout_seconds: z.number().int().min(1).max(55).optional().describe('How long to wait (1-55, default 45); call again if not done'),
  },
  annotations: { readOnlyHint: true },
  async run(args, ctx) {
    const { generation, library } = ctx.deps.clients;
    const deadline = Date.now() + (args.timeout_seconds ?? 45) * 1000;
    let e = await generation.getExecution({ executionId: args.execution_id, includeLogs: false }, ctx.principal);
    let last = -1;
    while ((e.status === 'queued' || e.status === 'running') && Date.now() < deadline) {
      if (e.progressPercent !== last) {
        last = e.progressPercent;
        await ctx.progress(e.progressPercent, 100, e.currentStep);
      }
      await sleep(Math.min(POLL_MS, Math.max(0, deadline - Date.now())));
      e = await generation.getExecution({ executionId: args.execution_id, includeLogs: false }, ctx.principal);
    }
    if (e.status === 'queued' || e.status === 'running') {
      return { data: { done: false, execution: executionJson(e), message: `Still ${e.status}; call wait_for_execution again` } };
    }
    if (e.status !== 'completed') {
      throw new AppError(502, { error: e.error || 'Execution failed', executionId: e.executionId, execution: executionJson(e) });
    }
    // Its images, as the library lists them (any replica may have run it; completedImages lists them if need be).
    const listed = await completedImages(e, library, ctx.principal);
    if (listed) {
      const res = generatedAnswer(e, listed);
      const result = e.operation === 'POST /api/images' || e.toolName === 'generate_image' ? generateResultJson(res) : undefined;
      const thumbs = await thumbnailsOfGenerated(ctx, res.images);
      return {
        data: { done: true, execution: executionJson(e), result: result ?? { images: listed.map(sessionImageJson) } },
        images: thumbs,
      };
    }
    // Images deleted since (or an execution from before image ids were kept): what its session still lists.
    let images: ReturnType<typeof sessionImageJson>[] = [];
    let thumbs: ToolImage[] = [];
    try {
      const sess = await library.getSession({ sessionId: e.sessionId, asJson: false, sessionOnly: false }, ctx.principal);
      const mine = sess.images.filter((i) => i.executionId === e.executionId);
      images = mine.map(sessionImageJson);
      thumbs = await thumbnailsOf(
        ctx,
        mine.map((i) => i.thumbnailKey),
      );
    } catch {}
    return { data: { done: true, execution: executionJson(e), result: { images } }, images: thumbs };
  },
});

const cancelExecution = defineTool({
  name: 'cancel_execution',
  description:
    'Cancel a queued or running generation (e.g. from generate_image async=true): a queued one never runs, a running one stops; nothing of it is billed.',
  operation: 'POST /api/executions/:executionId/cancel',
  input: { execution_id: executionId() },
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false },
  async run(args, ctx) {
    const e = await ctx.deps.clients.generation.cancelExecution({ executionId: args.execution_id }, ctx.principal);
    return { data: { success: true, execution: executionJson(e) } };
  },
});

// ---- usage and profile (SPEC 4.7) ----

const getUsage = defineTool({
  name: 'get_usage',
  description: 'Monthly usage (newest first), the rolling 30 days and the quota.',
  operation: 'GET /api/usage',
  input: UsageQuery.shape,
  // GET /api/usage answers a bad limit with 'Invalid limit' (SPEC 7)
  invalidArguments: 'Invalid limit',
  annotations: { readOnlyHint: true },
  async run(args, ctx) {
    const r = await ctx.deps.clients.usage.getUsage({ tenantId: ctx.principal.tenantId ?? '', limit: args.limit }, ctx.principal);
    return { data: { data: usageJson(r) } };
  },
});

const getProfile = defineTool({
  name: 'get_profile',
  description: 'The tenant (id, name), its quota, and the models it may use with its default one.',
  operation: 'GET /api/profile',
  input: {},
  annotations: { readOnlyHint: true },
  async run(_args, ctx) {
    const tenantId = ctx.principal.tenantId ?? '';
    const [t, q] = await Promise.all([
      ctx.deps.clients.tenancy.getTenant({ tenantId }, ctx.principal),
      ctx.deps.clients.usage.getQuota({ tenantId }, ctx.principal),
    ]);
    return { data: profileJson(t, q) };
  },
});

// ---- webhooks (SPEC 4.11) ----

const listWebhooks = defineTool({
  name: 'list_webhooks',
  description: 'List the webhooks of the tenant, with the event types each receives.',
  operation: 'GET /api/webhooks',
  input: {},
  annotations: { readOnlyHint: true },
  async run(_args, ctx) {
    const r = await ctx.deps.clients.webhooks.listWebhooks({}, ctx.principal);
    return { data: { data: r.webhooks.map(webhookJson) } };
  },
});

const createWebhook = defineTool({
  name: 'create_webhook',
  description: 'Register an HTTPS webhook for chosen event types, all by default (the signing secret is shown once).',
  operation: 'POST /api/webhooks',
  input: WebhookBody.shape,
  annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  async run(args, ctx) {
    const r = await ctx.deps.clients.webhooks.createWebhook(
      CreateWebhookRequest.fromPartial({ url: args.url, events: args.events ?? [], description: args.description }),
      ctx.principal,
    );
    // POST /api/webhooks: {data: {...webhook, secret}}
    return { data: { data: webhookCreatedJson(r) } };
  },
});

const updateWebhook = defineTool({
  name: 'update_webhook',
  description: 'Change a webhook: enabled (true re-enables after failures), description (null clears), the event types it receives.',
  operation: 'PATCH /api/webhooks/:id',
  input: { id: s.id('Webhook id'), ...WebhookUpdateBody.shape },
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
  async run(args, ctx) {
    // PATCH /api/webhooks/:id's rule and wording: at least one of the fields.
    if (args.enabled === undefined && args.description === undefined && args.events === undefined)
      throw badRequest('Invalid request payload', ['enabled, description or events is required']);
    const w = await ctx.deps.clients.webhooks.updateWebhook(
      UpdateWebhookRequest.fromPartial({
        id: args.id,
        enabled: args.enabled,
        description: args.description === null ? '' : args.description,
        events: args.events === undefined ? undefined : { events: args.events },
      }),
      ctx.principal,
    );
    return { data: { data: webhookJson(w) } };
  },
});

const deleteWebhook = defineTool({
  name: 'delete_webhook',
  description: 'Delete a webhook.',
  operation: 'DELETE /api/webhooks/:id',
  input: { id: s.id('Webhook id') },
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
  async run(args, ctx) {
    await ctx.deps.clients.webhooks.deleteWebhook({ id: args.id }, ctx.principal);
    // DELETE /api/webhooks/:id: {data: {deleted: true, id}}
    return { data: { data: { deleted: true, id: args.id } } };
  },
});

// ---- models ----

const MODEL_NOTES: Record<(typeof MODEL_IDS)[number], string> = {
  'provA-flash-lite-image': 'Default. Fastest, lowest cost, fixed at 1K output.',
  'provA-flash-image': '2K/4K tiers, broader ratios, stronger multi-reference.',
  'provA-pro-image': 'Higher quality, 4K tiers, web search grounding.',
  'provB-image-2': 'Best text rendering; quality low/medium/high/auto; png/jpeg/webp output.',
  'provB-image-2.5-flare': 'As provB-image-2 plus quality xhigh/max and transparent backgrounds.',
  'provB-image-2.5-sunburst': 'Same controls as flare; precise generation and editing.',
};

const listModels = defineTool({
  name: 'list_models',
  description: "The image models, which ones this tenant may use, and the tenant's default.",
  scopes: [],
  anyScopes: ['images:generate', 'images:edit', 'images:read'],
  input: {},
  annotations: { readOnlyHint: true },
  async run(_args, ctx) {
    const t = await ctx.deps.clients.tenancy.getTenant({ tenantId: ctx.principal.tenantId ?? '' }, ctx.principal);
    const allowed = new Set(allowedModelsOf(t));
    const defaultModel = defaultModelFor(t);
    return {
      data: {
        defaultModel,
        models: MODEL_IDS.map((id) => ({
          model_id: id,
          provider: id.startsWith('provA') ? 'provA' : 'provB',
          notes: MODEL_NOTES[id],
          allowed: allowed.has(id),
          default: id === defaultModel,
        })),
      },
    };
  },
});

export const sessionTools = [
  listSessions,
  getSession,
  getSessionLogs,
  listActiveExecutions,
  getExecution,
  waitForExecution,
  cancelExecution,
];
export const accountTools = [getUsage, getProfile];
export const webhookTools = [listWebhooks, createWebhook, updateWebhook, deleteWebhook];
export const modelTools = [listModels];
