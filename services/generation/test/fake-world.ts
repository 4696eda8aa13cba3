import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ImageRecord, StoreImageRequest } from '@imagegen/contracts/library/v1/library';
import {
  AppError,
  createInProcessTransport,
  createLogger,
  createStorage,
  createTestDatabase,
  type EventMessage,
  loadConfig,
  type Principal,
  type ServiceContext,
} from '@imagegen/platform';
import sharp from 'sharp';
import { type RunningSandbox, startSandbox } from '../../sandbox-provider/src/service.js';
import type { Collaborators } from '../src/deps.js';
import { MODEL_IDS, type Provider } from '../src/models.js';
import { type GenerationOptions, startGeneration } from '../src/service.js';

/** In-memory tenancy, library and usage for the generation service tests (they count and record their calls). */
export class FakeWorld implements Collaborators {
  keys: Record<string, Record<Provider, string[]>> = {};
  tenants: Record<string, { modelId: string; allowedModels: string[] }> = {};
  quotaAllowed = true;
  /** The next this-many StoreImage calls fail (as the library does when a session fills up meanwhile). */
  failStores = 0;
  stored: StoreImageRequest[] = [];
  /** Executions whose pending images were committed (CommitExecutionImages). */
  committed: string[] = [];
  /** The next this-many CommitExecutionImages calls fail with 503 (the library's database away). */
  failCommits = 0;
  commitCalls = 0;
  committedIds: number[] = [];
  images = new Map<number, { rec: ImageRecord; data: Buffer; tenantId: string }>();
  private seq = 0;

  async getTenant(_p: Principal, tenantId: string) {
    const t = this.tenants[tenantId] ?? { modelId: 'provA-flash-lite-image', allowedModels: MODEL_IDS };
    return { tenantId, isActive: true, credentialsIncludePrompt: false, ...t };
  }
  async getProviderKeys(_p: Principal, tenantId: string, provider: Provider) {
    return this.keys[tenantId]?.[provider] ?? [provider === 'provA' ? 'sandbox-key-a1' : 'sandbox-key-b1'];
  }
  async checkQuota() {
    return { allowed: this.quotaAllowed };
  }
  touched: string[] = [];
  async touchSession(_p: Principal, _tenantId: string, sessionId: string) {
    this.touched.push(sessionId);
    return { remaining: 1000 };
  }
  async storeImage(_p: Principal, req: StoreImageRequest): Promise<ImageRecord> {
    if (this.failStores > 0) {
      this.failStores--;
      throw new AppError(400, { error: 'Session image limit reached' });
    }
    this.stored.push(req);
    const meta = await sharp(req.data).metadata();
    const id = ++this.seq;
    const rec: ImageRecord = {
      id,
      tenantId: req.tenantId,
      sessionId: req.sessionId,
      objectKey: `tenants/${req.tenantId}/images/${id}.${meta.format}`,
      thumbnailKey: `tenants/${req.tenantId}/thumbnails/${id}.webp`,
      fullUrl: `http://files/${id}`,
      thumbnailUrl: `http://files/${id}/thumb`,
      width: meta.width ?? 0,
      height: meta.height ?? 0,
      sizeBytes: req.data.length,
      thumbnailSizeBytes: 100,
      format: meta.format ?? '',
      mimeType: req.mimeType,
      prompt: req.prompt,
      negativePrompt: req.negativePrompt,
      operation: req.operation,
      aspectRatio: req.aspectRatio,
      modelId: req.modelId,
      resolutionTier: req.resolutionTier,
      parentImageId: req.parentImageId,
      referenceGroupIds: [],
      hasReferenceGroupIds: false,
      isReference: false,
      executionId: req.executionId,
      hasSynthid: req.hasSynthid,
      keyType: req.keyType,
      createdAt: new Date().toISOString(),
      thumbnailMimeType: 'image/webp',
    };
    this.images.set(id, { rec, data: req.data, tenantId: req.tenantId });
    return rec;
  }
  async commitExecutionImages(_p: Principal, _tenantId: string, executionId: string, imageIds: number[]) {
    this.commitCalls++;
    if (this.failCommits > 0) {
      this.failCommits--;
      throw new AppError(503, { error: 'Service temporarily unavailable' }, { 'retry-after': '2' });
    }
    this.committed.push(executionId);
    this.committedIds.push(...imageIds);
  }
  async getImageData(p: Principal, imageId: number) {
    const img = this.images.get(imageId);
    if (!img || img.tenantId !== p.tenantId) throw new AppError(404, { error: 'Image not found' });
    return { image: img.rec, data: img.data, mimeType: img.rec.mimeType };
  }
  async getObjectData(): Promise<never> {
    throw new AppError(404, { error: 'Object not found' });
  }
  async sessionExists() {
    return false;
  }
  close() {}
}

export interface GenerationHarness {
  sandbox: RunningSandbox;
  gen: Awaited<ReturnType<typeof startGeneration>>;
  world: FakeWorld;
  db: { url: string; drop: () => Promise<void> };
  /** Every ExecutionFinished message, as published. */
  finished: EventMessage[];
  stop(): Promise<void>;
}

/**
 * The generation service against the real sandbox upstream, a fresh PostgreSQL database and the in-process event
 * transport, with tenancy, library and usage as a FakeWorld. `env` adds to its configuration.
 */
export async function startGenerationHarness(
  name: string,
  opts: { env?: Record<string, string>; settings?: GenerationOptions['settings'] } = {},
): Promise<GenerationHarness> {
  const sandbox = await startSandbox();
  const db = await createTestDatabase(undefined, name);
  const dataDir = mkdtempSync(join(tmpdir(), `${name}-test-`));
  const config = loadConfig({
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    EVENTS_PREFIX: `${name}${Date.now().toString(36)}`,
    PROVA_BASE_URL: `${sandbox.httpUrl}/provA`,
    PROVB_BASE_URL: `${sandbox.httpUrl}/provB`,
    LOG_LEVEL: 'silent',
    ...opts.env,
  });
  const logger = createLogger(`${name}-test`, process.env.TEST_LOG_LEVEL ?? 'silent');
  const transport = createInProcessTransport({ logger });
  const finished: EventMessage[] = [];
  await transport.subscribe({
    durable: 'test',
    subjects: [`${config.eventsPrefix}.generation.execution_finished`],
    handler: async (m) => {
      finished.push(m);
    },
  });
  const ctx: ServiceContext = {
    config,
    logger,
    events: transport,
    storage: createStorage({ dataDir, publicBaseUrl: 'http://x' }),
    resolve: () => {
      throw new Error('not used');
    },
  };
  const world = new FakeWorld();
  const gen = await startGeneration(ctx, { collaborators: world, settings: opts.settings });
  return {
    sandbox,
    gen,
    world,
    db,
    finished,
    async stop() {
      await gen.stop();
      await sandbox.stop();
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
