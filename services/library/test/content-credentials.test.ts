import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Reader } from '@contentauth/c2pa-node';
import type { ImageRecord, StoreImageRequest } from '@imagegen/contracts/library/v1/library';
import { tenantKey } from '@imagegen/platform';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMPORTED_OPERATIONS, TRAINED_ALGORITHMIC_MEDIA } from '../src/credentials/content-credentials.js';
import { ensureDevelopmentChain } from '../src/credentials/dev-chain.js';
import { type LibraryHarness, startLibrary } from './support.js';

/**
 * Content Credentials (issue 39) through the library's StoreImage, the one place provider output reaches storage:
 * every operation and format is stored signed and validates as Trusted with the configured root (c2pa-rs); an edit
 * of an edit chains three manifests; one changed byte fails validation; a library without credentials stores
 * unsigned and says so; an import keeps the manifest it came with.
 */
const FORMATS = ['png', 'jpeg', 'webp'] as const;
type Format = (typeof FORMATS)[number];

let chainDir: string;
let rootPem: string;
let h: LibraryHarness;
let unsigned: LibraryHarness;
const tenant = 'tC2pa';

const picture = (format: Format, seed: number) =>
  sharp({ create: { width: 64, height: 48, channels: 3, background: { r: seed % 256, g: (seed * 7) % 256, b: 90 } } })
    .toFormat(format)
    .toBuffer();

function request(over: Partial<StoreImageRequest> & { data: Buffer }): StoreImageRequest {
  return {
    tenantId: tenant,
    sessionId: 'c2pa',
    mimeType: '',
    prompt: 'a private prompt',
    operation: 'generate',
    aspectRatio: '4:3',
    modelId: 'provA-pro-image',
    resolutionTier: '1k',
    referenceGroupIds: [],
    isReference: false,
    executionId: '',
    hasSynthid: false,
    keyType: 'live',
    tokens: 0,
    pending: false,
    referenceObjectKeys: [],
    credentialsIncludePrompt: false,
    ...over,
  };
}

async function manifestStoreOf(harness: LibraryHarness, rec: ImageRecord, data?: Buffer) {
  const bytes = data ?? (await harness.ctx.storage.get(rec.objectKey));
  const reader = await Reader.fromAsset({ buffer: bytes, mimeType: rec.mimeType }, { trust: { trust_anchors: rootPem } });
  return reader?.json();
}

beforeAll(async () => {
  chainDir = mkdtempSync(join(tmpdir(), 'imagegen-c2pa-'));
  const chain = await ensureDevelopmentChain(chainDir);
  rootPem = readFileSync(chain.rootFile, 'utf8');
  [h, unsigned] = await Promise.all([
    startLibrary({
      C2PA_SIGNING_KEY: chain.keyFile,
      C2PA_SIGNING_CHAIN: readFileSync(chain.chainFile, 'utf8'),
      C2PA_TRUST_ANCHORS: chain.rootFile,
    }),
    startLibrary({ C2PA_TRUST_ANCHORS: rootPem }),
  ]);
  // Reference images (a character's, a product's, a scene's) in the tenant's storage, as the assets keep them.
  for (const [i, name] of ['characters/a.png', 'characters/b.png', 'products/p.png', 'scenes/s.png'].entries()) {
    await h.ctx.storage.put(tenantKey(tenant, name), await picture('png', 200 + i), 'image/png');
  }
});

afterAll(async () => {
  await Promise.all([h?.stop(), unsigned?.stop()]);
  rmSync(chainDir, { recursive: true, force: true });
});

/** The generations the issue names, as generation sends them to StoreImage. */
const OPERATIONS: Record<string, (parent: ImageRecord) => Partial<StoreImageRequest>> = {
  generate: () => ({}),
  edit: (parent) => ({ operation: 'edit', parentImageId: parent.id }),
  character: () => ({ characterId: 1, referenceObjectKeys: [tenantKey(tenant, 'characters/a.png')] }),
  'multi-character': () => ({
    characterId: 1,
    referenceObjectKeys: [tenantKey(tenant, 'characters/a.png'), tenantKey(tenant, 'characters/b.png')],
  }),
  product: () => ({ productReferenceId: 3, referenceObjectKeys: [tenantKey(tenant, 'products/p.png')] }),
  scene: () => ({ referenceGroupIds: [4], referenceObjectKeys: [tenantKey(tenant, 'scenes/s.png')] }),
};

describe('provider output is stored signed', () => {
  for (const format of FORMATS) {
    it(`every operation in ${format} validates as Trusted, names the model and the ingredients, and leaves the prompt out`, async () => {
      const parent = await h.client.storeImage(request({ data: await picture(format, 1) }), h.principal(tenant));
      for (const [name, over] of Object.entries(OPERATIONS)) {
        const rec = await h.client.storeImage(request({ data: await picture(format, 2), ...over(parent) }), h.principal(tenant));
        expect(rec.credentialsState, name).toBe('Trusted');
        expect(rec.credentialsIssuer).toBe('imagegen development');
        const store = await manifestStoreOf(h, rec);
        expect(store?.validation_state, name).toBe('Trusted');
        const active = store?.manifests?.[store.active_manifest as string];
        expect(active?.claim_generator_info?.[0]).toMatchObject({ name: 'imagegen' });
        const assertion = active?.assertions?.find((a) => a.label.startsWith('c2pa.actions'));
        const actions = (assertion?.data as { actions: Record<string, unknown>[] } | undefined)?.actions ?? [];
        const refs = over(parent).referenceObjectKeys?.length ?? 0;
        if (name === 'edit') {
          expect(actions.map((a) => a.action)).toEqual(['c2pa.opened', 'c2pa.edited']);
          expect(active?.ingredients?.map((i) => i.relationship)).toEqual(['parentOf']);
        } else {
          expect(actions[0]).toMatchObject({ action: 'c2pa.created', digitalSourceType: TRAINED_ALGORITHMIC_MEDIA });
          expect(active?.ingredients?.map((i) => i.relationship) ?? []).toEqual(Array(refs).fill('componentOf'));
        }
        expect(JSON.stringify(actions)).toContain('provA-pro-image');
        expect(JSON.stringify(store)).not.toContain('a private prompt');
        // Nothing c2pa-rs flags (a malformed action list is signed without complaint and only a reader says so).
        expect(store?.validation_results?.activeManifest?.failure ?? []).toEqual([]);
      }
    });
  }

  it('an edit of an edit carries three manifests, each parent an ingredient of the next', async () => {
    const first = await h.client.storeImage(request({ data: await picture('png', 10) }), h.principal(tenant));
    const second = await h.client.storeImage(
      request({ data: await picture('png', 11), operation: 'edit', parentImageId: first.id }),
      h.principal(tenant),
    );
    const third = await h.client.storeImage(
      request({ data: await picture('png', 12), operation: 'edit', parentImageId: second.id }),
      h.principal(tenant),
    );
    const store = await manifestStoreOf(h, third);
    expect(store?.validation_state).toBe('Trusted');
    const manifests = store?.manifests ?? {};
    expect(Object.keys(manifests)).toHaveLength(3);
    const parentLabel = (label: string) => manifests[label]?.ingredients?.find((i) => i.relationship === 'parentOf')?.active_manifest;
    const secondLabel = parentLabel(store?.active_manifest as string);
    const firstLabel = parentLabel(secondLabel as string);
    expect(secondLabel).toBeTruthy();
    expect(firstLabel).toBeTruthy();
    expect(new Set([store?.active_manifest, secondLabel, firstLabel]).size).toBe(3);
    expect(manifests[firstLabel as string]?.ingredients ?? []).toEqual([]);
  });

  it('one changed byte of image data fails validation', async () => {
    for (const format of FORMATS) {
      const rec = await h.client.storeImage(request({ data: await picture(format, 20) }), h.principal(tenant));
      const data = Buffer.from(await h.ctx.storage.get(rec.objectKey));
      // A byte of the pixel data, past the chunk/segment that names it: IDAT (PNG), the scan (JPEG), VP8 (WebP).
      const at = format === 'png' ? data.indexOf('IDAT') + 8 : format === 'webp' ? data.indexOf('VP8') + 12 : data.length - 8;
      data[at] ^= 0x01;
      let state: string | null | undefined;
      try {
        state = (await manifestStoreOf(h, rec, data))?.validation_state;
      } catch {
        state = 'unreadable';
      }
      expect(state, format).not.toBe('Trusted');
      expect(state, format).not.toBe('Valid');
    }
  });

  it('the prompt is in the manifest only when the request asks for it (credentials_include_prompt)', async () => {
    const rec = await h.client.storeImage(
      request({ data: await picture('png', 40), prompt: 'a shareable prompt', credentialsIncludePrompt: true }),
      h.principal(tenant),
    );
    expect(JSON.stringify(await manifestStoreOf(h, rec))).toContain('a shareable prompt');
  });

  it('only the imports keep their bytes unsigned: every other operation is provider output', () => {
    // A new operation is signed unless declared an import here (and reviewed): this list is the whole exception.
    expect([...IMPORTED_OPERATIONS].sort()).toEqual(['scene-reference', 'upload']);
  });
});

describe('without credentials configured', () => {
  it('stores the image, unsigned, and records no credentials', async () => {
    const data = await picture('png', 30);
    const rec = await unsigned.client.storeImage(request({ data }), unsigned.principal(tenant));
    expect(rec.credentialsState).toBeUndefined();
    expect(Buffer.compare(await unsigned.ctx.storage.get(rec.objectKey), data)).toBe(0);
    const read = await unsigned.client.getImageCredentials({ imageId: rec.id }, unsigned.principal(tenant));
    expect(read).toMatchObject({ present: false, manifestStoreJson: 'null' });
  });

  it('an upload keeps the manifest it came with, and reading validates it', async () => {
    const signed = await h.client.storeImage(request({ data: await picture('jpeg', 31) }), h.principal(tenant));
    const bytes = await h.ctx.storage.get(signed.objectKey);
    const rec = await unsigned.client.storeImage(request({ data: bytes, operation: 'upload', modelId: '' }), unsigned.principal(tenant));
    expect(Buffer.compare(await unsigned.ctx.storage.get(rec.objectKey), bytes)).toBe(0);
    expect(rec).toMatchObject({ credentialsState: 'Trusted', credentialsIssuer: 'imagegen development' });
    const read = await unsigned.client.getImageCredentials({ imageId: rec.id }, unsigned.principal(tenant));
    expect(read).toMatchObject({ present: true, validationState: 'Trusted', issuer: 'imagegen development' });
    expect(Object.keys(JSON.parse(read.manifestStoreJson).manifests)).toHaveLength(1);
  });

  it("another tenant's image is not found", async () => {
    const rec = await h.client.storeImage(request({ data: await picture('png', 32) }), h.principal(tenant));
    await expect(h.client.getImageCredentials({ imageId: rec.id }, h.principal('tOther'))).rejects.toMatchObject({ status: 404 });
  });

  it("a reference key outside the tenant's prefix is refused", async () => {
    const over = { referenceObjectKeys: [tenantKey('tOther', 'characters/a.png')] };
    await expect(h.client.storeImage(request({ data: await picture('png', 33), ...over }), h.principal(tenant))).rejects.toMatchObject({
      status: 400,
    });
  });
});
