import { ExecutionFinished } from '@imagegen/contracts/events/v1/events';
import type { AppError, EventMessage, Principal } from '@imagegen/platform';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/wait.js';
import type { RunningSandbox } from '../../sandbox-provider/src/service.js';
import type { startGeneration } from '../src/service.js';
import { type FakeWorld, type GenerationHarness, startGenerationHarness } from './fake-world.js';

type Gen = Awaited<ReturnType<typeof startGeneration>>;

let sandbox: RunningSandbox;
let gen: Gen;
let world: FakeWorld;
let events: EventMessage[] = [];
let tenantSeq = 0;

const principal = (tenantId: string, extra: Partial<Principal> = {}): Principal => ({
  requestId: `r-${Math.random()}`,
  tenantId,
  keyType: 'live',
  source: 'tenant_api',
  ...extra,
});
const newTenant = () => `pt${++tenantSeq}${Math.random().toString(36).slice(2, 6)}`;
const sandboxRequests = async (q = '') => (await (await fetch(`${sandbox.httpUrl}/_sandbox/requests${q}`)).json()).requests as any[];
const setMode = (body: unknown) =>
  fetch(`${sandbox.httpUrl}/_sandbox/mode`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
const fails = async (p: Promise<unknown>): Promise<AppError> => {
  try {
    await p;
  } catch (err) {
    return err as AppError;
  }
  throw new Error('expected a failure');
};

let h: GenerationHarness;
beforeAll(async () => {
  h = await startGenerationHarness('gen', {
    env: { PROVA_MODEL_MAP: JSON.stringify({ 'provA-pro-image': 'custom-pro-upstream' }) },
    settings: { breakerFailureThreshold: 2, breakerResetTimeoutMs: 400, provATimeoutMs: 1500 },
  });
  ({ sandbox, gen, world } = h);
  events = h.finished;
});

afterAll(async () => {
  await h?.stop();
});

beforeEach(async () => {
  await fetch(`${sandbox.httpUrl}/_sandbox/mode`, { method: 'DELETE' });
  world.quotaAllowed = true;
  world.failStores = 0;
  world.failCommits = 0;
});

describe('generate', () => {
  it('stores images pending and commits them only after the execution completed', async () => {
    const t = newTenant();
    const res = await gen.pipeline.generate({ prompt: 'pending then listed', n: 1 }, principal(t, { sessionId: 'sess-c' }));
    expect(world.stored.at(-1)?.pending).toBe(true);
    expect(world.committed).toContain(res.executionId);
    expect(world.committedIds).toContain(res.images[0].recordId);
  });

  it('answers only once the images are committed: a commit that fails (the library`s database away) is retried while the caller waits', async () => {
    const t = newTenant();
    world.failCommits = 3;
    const calls = world.commitCalls;
    const res = await gen.pipeline.generate({ prompt: 'committed before answered', n: 1 }, principal(t, { sessionId: 'sess-retry' }));
    expect(world.commitCalls - calls).toBe(4);
    expect(world.committed.at(-1)).toBe(res.executionId);
    expect(world.committedIds.at(-1)).toBe(res.images[0].recordId);
  });

  it('a caller that goes away while the commit is retried gets 503; the execution stays completed (its ExecutionFinished commits the images)', async () => {
    const t = newTenant();
    world.failCommits = 1_000_000;
    const gone = new AbortController();
    const calls = world.commitCalls;
    const answer = gen.pipeline.generate({ prompt: 'left while committing', n: 1 }, principal(t, { sessionId: 'sess-left' }), gone.signal);
    await waitFor(() => world.commitCalls - calls >= 2);
    gone.abort();
    await expect(answer).rejects.toMatchObject({ status: 503 });
    const [row] = await gen.deps.sql`SELECT status, image_ids FROM executions WHERE tenant_id = ${t} AND session_id = 'sess-left'`;
    expect(row.status).toBe('completed');
    expect(row.image_ids).toHaveLength(1);
    world.failCommits = 0;
  });

  it('looks up a session the call names; a new one (no session given) costs no look-up and is stored with its image', async () => {
    const t = newTenant();
    const named = await gen.pipeline.generate({ prompt: 'in a named session', n: 1, sessionId: 'sess-named' }, principal(t));
    expect(named.sessionId).toBe('sess-named');
    expect(world.touched.at(-1)).toBe('sess-named');
    const touches = world.touched.length;
    const fresh = await gen.pipeline.generate({ prompt: 'in a new session', n: 1 }, principal(t));
    expect(world.touched.length).toBe(touches);
    expect(fresh.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(world.stored.at(-1)?.sessionId).toBe(fresh.sessionId);
  });

  it('fails the execution and commits nothing when the caller went away before it completed', async () => {
    const t = newTenant();
    const gone = new AbortController();
    gone.abort();
    const before = world.committed.length;
    await expect(
      gen.pipeline.generate({ prompt: 'nobody waits for this', n: 1 }, principal(t, { sessionId: 'sess-gone' }), gone.signal),
    ).rejects.toMatchObject({ status: 503 });
    expect(world.committed.length).toBe(before);
    const [row] = await gen.deps.sql`SELECT status FROM executions WHERE tenant_id = ${t} AND session_id = 'sess-gone'`;
    expect(row.status).toBe('failed');
  });

  it('calls provA once per image, stores each and records a completed execution with ExecutionFinished', async () => {
    const t = newTenant();
    const res = await gen.pipeline.generate(
      { prompt: 'two tiny boats', n: 2, negativePrompt: 'no people', aspectRatio: '16:9' },
      principal(t, { sessionId: 'sess-1' }),
    );
    expect(res).toMatchObject({ requested: 2, generated: 2, sessionId: 'sess-1' });
    expect(res.images.map((i) => [i.width, i.height, i.format, i.aspectRatio, i.resolutionTier, i.hasSynthid])).toEqual([
      [1376, 768, 'png', '16:9', '1k', true],
      [1376, 768, 'png', '16:9', '1k', true],
    ]);
    const recs = await sandboxRequests(`?apiKey=sandbox-key-a1&contains=two%20tiny%20boats`);
    expect(recs).toHaveLength(2);
    expect(recs[0]).toMatchObject({
      model: 'flash-lite-image',
      aspectRatio: '16:9',
      imageSize: null,
      prompt: 'two tiny boats\n\nAvoid: no people',
    });
    const stored = world.stored.filter((s) => s.tenantId === t);
    expect(stored.map((s) => [s.operation, s.negativePrompt, s.modelId, s.keyType, s.executionId])).toEqual([
      ['generate', 'no people', 'provA-flash-lite-image', 'live', res.executionId],
      ['generate', 'no people', 'provA-flash-lite-image', 'live', res.executionId],
    ]);
    const ex = await gen.deps.sql`SELECT status, progress_percent, images FROM executions WHERE execution_id = ${res.executionId}`;
    expect(ex[0]).toMatchObject({ status: 'completed', progress_percent: 100, images: 2 });
    const ev = await waitFor(() => events.map((m) => ExecutionFinished.decode(m.data)).find((e) => e.executionId === res.executionId));
    expect(ev).toMatchObject({
      tenantId: t,
      sessionId: 'sess-1',
      toolName: 'generate_image',
      status: 'completed',
      images: 2,
      keyType: 'live',
    });
    expect(ev.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('sends provA tier, search, thinking, system instruction and the configured upstream model name', async () => {
    const t = newTenant();
    await gen.pipeline.generate(
      {
        prompt: 'pro shot',
        modelId: 'provA-pro-image',
        resolutionTier: '2k',
        useProvaSearch: true,
        enableThinking: true,
        systemInstruction: 'moody',
      },
      principal(t),
    );
    const [rec] = await sandboxRequests('?contains=pro%20shot');
    expect(rec).toMatchObject({
      model: 'custom-pro-upstream',
      imageSize: '2K',
      tools: ['googleSearch'],
      systemInstruction: 'moody',
      aspectRatio: '1:1',
    });
    expect(rec.thinkingConfig).toBeTruthy();
    expect(rec.width).toBe(2048);
  });

  it('sends provB options in one call with n', async () => {
    const t = newTenant();
    const res = await gen.pipeline.generate(
      {
        prompt: 'b-options',
        modelId: 'provB-image-2.5-flare',
        n: 3,
        outputFormat: 'webp',
        outputCompression: 70,
        quality: 'xhigh',
        background: 'transparent',
        moderation: 'low',
        aspectRatio: '9:16',
      },
      principal(t),
    );
    expect(res.generated).toBe(3);
    const recs = await sandboxRequests('?contains=b-options');
    expect(recs).toHaveLength(1);
    expect(recs[0]).toMatchObject({
      model: 'image-2.5-flare',
      n: 3,
      size: '720x1280',
      outputFormat: 'webp',
      outputCompression: 70,
      quality: 'xhigh',
      background: 'transparent',
      moderation: 'low',
    });
    expect(res.images[0]).toMatchObject({ format: 'webp', width: 720, height: 1280, aspectRatio: '9:16', hasSynthid: false });
  });

  it('edits: the source goes upstream as an image input and becomes the parent; its shape is kept', async () => {
    const t = newTenant();
    const src = await gen.pipeline.generate({ prompt: 'wide source', aspectRatio: '16:9' }, principal(t));
    const edit = await gen.pipeline.edit({ imageId: src.images[0].recordId, prompt: 'make it night' }, principal(t));
    expect(edit.image).toMatchObject({ parentImageId: src.images[0].recordId, aspectRatio: '16:9', width: 1376 });
    const [rec] = await sandboxRequests('?contains=make%20it%20night');
    expect(rec.imageInputs).toBe(1);
    // provB edits are multipart with image[]
    const b = await gen.pipeline.generate(
      { prompt: 'b-edit', modelId: 'provB-image-2', imageToEditId: src.images[0].recordId },
      principal(t),
    );
    expect(b.images[0]).toMatchObject({ parentImageId: src.images[0].recordId, width: 1280, height: 720 });
    const [brec] = await sandboxRequests('?contains=b-edit');
    expect(brec).toMatchObject({ endpoint: 'edits', imageInputs: 1, size: '1280x720' });
    // another tenant's image is not found
    const err = await fails(gen.pipeline.edit({ imageId: src.images[0].recordId, prompt: 'steal' }, principal(newTenant())));
    expect(err.status).toBe(404);
  });
});

describe('keys', () => {
  it('fails over to the next key on 401 and rotates the starting key', async () => {
    const t = newTenant();
    world.keys[t] = { provA: ['bad-a1', 'sandbox-key-a2'], provB: ['quota-b1', 'sandbox-key-b2'] };
    const res = await gen.pipeline.generate({ prompt: 'failover-a' }, principal(t));
    expect(res.generated).toBe(1);
    const recs = await sandboxRequests('?contains=failover-a');
    expect(recs.map((r) => [r.apiKey, r.status])).toEqual([
      ['bad-a1', 401],
      ['sandbox-key-a2', 200],
    ]);
    const logs = await gen.deps.sql`SELECT message, logged_at FROM execution_logs WHERE execution_id = ${res.executionId} ORDER BY id`;
    expect(logs.map((l) => l.message).join('\n')).toMatch(/provA key 1 of 2 refused \(auth, HTTP 401\); trying the next key/);
    // Lines are stored in the order they were said (batched, never concurrently), the final one last, all counted.
    expect(logs[0]?.message).toMatch(/^Generating 1 image/);
    expect(logs.at(-1)?.message).toMatch(/^Completed: /);
    const times = logs.map((l) => (l.logged_at as Date).getTime());
    expect(times).toEqual([...times].sort((a, b) => a - b));
    const [exec] = await gen.deps.sql`SELECT log_count, current_step FROM executions WHERE execution_id = ${res.executionId}`;
    expect(exec?.log_count).toBe(logs.length);
    // the next request starts with the second key
    await gen.pipeline.generate({ prompt: 'failover-a second' }, principal(t));
    expect((await sandboxRequests('?contains=failover-a%20second')).map((r) => r.apiKey)).toEqual(['sandbox-key-a2']);
    // 429 quota on provB also fails over
    await gen.pipeline.generate({ prompt: 'failover-b', modelId: 'provB-image-2' }, principal(t));
    expect((await sandboxRequests('?contains=failover-b')).map((r) => [r.apiKey, r.status])).toEqual([
      ['quota-b1', 429],
      ['sandbox-key-b2', 200],
    ]);
  });

  it('answers 502 when every key is rejected and 503 when every key is out of quota; 400 without keys', async () => {
    const t = newTenant();
    world.keys[t] = { provA: ['bad-1', 'bad-2', 'forbidden-3'], provB: ['quota-1', 'ratelimit-2'] };
    let err = await fails(gen.pipeline.generate({ prompt: 'all bad' }, principal(t)));
    expect(err.status).toBe(502);
    expect(err.body.error).toBe('Image generation failed: provider provA rejected every configured API key');
    err = await fails(gen.pipeline.generate({ prompt: 'all quota', modelId: 'provB-image-2' }, principal(t)));
    expect(err.status).toBe(503);
    expect(err.headers['Retry-After']).toBe('20'); // the soonest wait: ratelimit-2 says 20 s, quota-1 none (30)
    const t2 = newTenant();
    world.keys[t2] = { provA: [], provB: [] };
    err = await fails(gen.pipeline.generate({ prompt: 'no keys' }, principal(t2)));
    expect(err.status).toBe(400);
    expect(err.body.error).toBe('No provA credentials are configured for this tenant');
    const failed = await gen.deps.sql`SELECT count(*)::int AS n FROM executions WHERE tenant_id = ${t} AND status = 'failed'`;
    expect(failed[0].n).toBe(2);
  });
});

describe('failures', () => {
  it('turns a provA safety block into 400 with the reason and a failed execution, storing nothing', async () => {
    const t = newTenant();
    const err = await fails(gen.pipeline.generate({ prompt: 'forbidden thing [[safety]]' }, principal(t)));
    expect(err.status).toBe(400);
    expect(err.body).toMatchObject({
      error: 'Content blocked by provider safety filters: SAFETY',
      code: 'CONTENT_BLOCKED',
      details: { provider: 'provA', reason: 'SAFETY' },
    });
    const img = await fails(gen.pipeline.generate({ prompt: 'bad picture [[image-safety]]' }, principal(t)));
    expect(img.body.error).toMatch(/^Content blocked by provider safety filters: IMAGE_SAFETY/);
    const b = await fails(gen.pipeline.generate({ prompt: 'bad [[safety]]', modelId: 'provB-image-2' }, principal(t)));
    expect(b.status).toBe(400);
    expect(b.body.error).toMatch(/^Content blocked by provider safety filters: Your request was rejected by the safety system/);
    expect(world.stored.filter((s) => s.tenantId === t)).toHaveLength(0);
    const rows = await gen.deps.sql`SELECT status, error FROM executions WHERE tenant_id = ${t}`;
    expect(rows.map((r) => r.status)).toEqual(['failed', 'failed', 'failed']);
    expect(rows[0].error).toMatch(/Content blocked/);
  });

  it('402 when the quota is used up: the picture stored pending while the quota was checked is never committed', async () => {
    const t = newTenant();
    world.quotaAllowed = false;
    const err = await fails(gen.pipeline.generate({ prompt: 'over quota' }, principal(t)));
    expect(err.status).toBe(402);
    expect(err.body).toEqual({ error: 'Monthly storage quota exceeded', code: 'QUOTA_EXCEEDED' });
    // Stored side by side with the check, pending: the failed execution's images are discarded, never listed.
    const stores = world.stored.filter((s) => s.tenantId === t);
    expect(stores.map((s) => s.pending)).toEqual([true]);
    expect(world.committed).not.toContain(stores[0].executionId);
    const [row] = await gen.deps.sql`SELECT status FROM executions WHERE execution_id = ${stores[0].executionId}`;
    expect(row.status).toBe('failed');
  });

  it('times out with 504 and opens the breaker after repeated upstream failures, then recovers', async () => {
    const t = newTenant();
    const timeout = await fails(gen.pipeline.generate({ prompt: 'slow [[delay:3000]]' }, principal(t)));
    expect(timeout.status).toBe(504);
    expect(timeout.body.error).toBe('Image generation timed out: provider provA did not answer within 2 s');
    expect(gen.breakers.provA.current).toBe('closed'); // 1 failure < threshold 2
    await setMode({ provider: 'provA', failNext: 5, status: 500 });
    const e1 = await fails(gen.pipeline.generate({ prompt: 'breaker 1' }, principal(t)));
    expect(e1.status).toBe(502);
    expect(gen.breakers.provA.current).toBe('open');
    const before = (await sandboxRequests('?provider=provA')).length;
    const fast = await fails(gen.pipeline.generate({ prompt: 'breaker 2' }, principal(t)));
    expect(fast.status).toBe(503);
    expect(fast.body.error).toMatch(/circuit breaker open/);
    expect((await sandboxRequests('?provider=provA')).length).toBe(before); // the upstream was not called
    // provB has its own breaker
    expect((await gen.pipeline.generate({ prompt: 'b still fine', modelId: 'provB-image-2' }, principal(t))).generated).toBe(1);
    await setMode({ provider: 'provA', reset: true });
    // Its reset timeout passed (by the breaker's clock), the next request is the trial.
    const open = gen.breakers.provA.status();
    await waitFor(() => Date.now() - Date.parse(open.openedAt as string) >= open.resetTimeoutMs, { message: "provA's reset timeout" });
    const ok = await gen.pipeline.generate({ prompt: 'breaker recovered' }, principal(t));
    expect(ok.generated).toBe(1);
    expect(gen.breakers.provA.current).toBe('closed');
  });

  it('returns the images that succeeded when some provA calls fail', async () => {
    const t = newTenant();
    await setMode({ provider: 'provA', failNext: 1, status: 503 });
    const res = await gen.pipeline.generate({ prompt: 'partial', n: 3 }, principal(t));
    expect(res).toMatchObject({ requested: 3, generated: 2 });
  });

  it('reports what was stored when some stores fail: no stored image is hidden behind an error', async () => {
    const t = newTenant();
    world.failStores = 1;
    const res = await gen.pipeline.generate({ prompt: 'store partly', n: 3 }, principal(t));
    expect(res).toMatchObject({ requested: 3, generated: 2 });
    const stored = world.stored.filter((x) => x.tenantId === t);
    expect(stored).toHaveLength(2);
    expect(res.images.map((i) => i.recordId).sort()).toEqual(
      [...world.images.values()]
        .filter((i) => i.tenantId === t)
        .map((i) => i.rec.id)
        .sort(),
    );
    const [ex] = await gen.deps.sql`SELECT status, images FROM executions WHERE execution_id = ${res.executionId}`;
    expect(ex).toMatchObject({ status: 'completed', images: 2 });
    const logs = await gen.deps.sql`SELECT level, message FROM execution_logs WHERE execution_id = ${res.executionId} ORDER BY id`;
    expect(logs.some((l) => l.level === 'warn' && /could not be stored: Session image limit reached/.test(l.message as string))).toBe(true);
    // every store failing is the call's error, and the execution fails
    world.failStores = 2;
    const err = await fails(gen.pipeline.generate({ prompt: 'store fails', n: 2, modelId: 'provB-image-2' }, principal(t)));
    expect(err.status).toBe(400);
    expect(err.body.error).toBe('Session image limit reached');
    const rows = await gen.deps.sql`SELECT status FROM executions WHERE tenant_id = ${t} ORDER BY started_at`;
    expect(rows.map((r) => r.status)).toEqual(['completed', 'failed']);
  });
});

describe('upload for editing', () => {
  it('refuses loopback addresses unless ALLOW_LOOPBACK_FETCH is set (the tests set it; production does not)', async () => {
    const { uploadForEditing } = await import('../src/upload.js');
    expect(gen.deps.config.allowLoopbackFetch).toBe(false);
    const t = newTenant();
    for (const url of [
      `${sandbox.httpUrl}/_sandbox/health`,
      'http://localhost:1/x.png',
      'http://[::1]:1/x.png',
      'http://169.254.169.254/latest/meta-data/',
    ]) {
      const err = await fails(uploadForEditing(gen.pipeline, gen.deps, { imageUrl: url }, principal(t)));
      expect(err.status, url).toBe(400);
      expect(err.body.error).toBe('Image URL is not allowed: it points to a private, loopback, link-local or metadata address');
    }
    const rows = await gen.deps.sql`SELECT tool_name, status FROM executions WHERE tenant_id = ${t}`;
    expect(rows.every((r) => r.tool_name === 'upload_for_editing' && r.status === 'failed')).toBe(true);
    expect(world.stored.filter((s) => s.tenantId === t)).toHaveLength(0);
  });
});
