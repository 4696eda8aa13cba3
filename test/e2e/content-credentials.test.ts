/**
 * Content Credentials (issue 39) through the gateway, with the whole stack as `pnpm start` runs it: started with no
 * signing settings, the all-in-one makes its development chain under DATA_DIR and signs every provider output.
 * - generate and edit in PNG, JPEG and WebP (provB's output_format): the served file validates as Trusted with the
 *   configured root (c2pa-rs, GET /api/images/:id/credentials) and, for PNG and JPEG, with c2pa-ts, the independent
 *   implementation; an edit of an edit chains three manifests;
 * - GET /api/images/:id says contentCredentials {present, validationState, issuer} from the row;
 * - GET /api/images/:id/credentials: success, validation (400), auth (401), tenant isolation (404);
 * - C2PA_SIGNING=off: images are stored and the answers say present:false.
 * (Each asset generation, the reference ingredients and one changed byte: services/library/test/content-credentials.test.ts.)
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { JPEG, PNG } from '@trustnxt/c2pa-ts/asset';
import { SuperBox } from '@trustnxt/c2pa-ts/jumbf';
import { ManifestStore } from '@trustnxt/c2pa-ts/manifest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';

let s: TestStack;
let off: TestStack;
let t: TestTenant;
let other: TestTenant;
let offTenant: TestTenant;

beforeAll(async () => {
  [s, off] = await Promise.all([
    startTestStack({ env: { RATE_LIMIT_DISABLED: '1' } }),
    startTestStack({ env: { RATE_LIMIT_DISABLED: '1', C2PA_SIGNING: 'off' } }),
  ]);
  [t, other, offTenant] = await Promise.all([s.createTenant(), s.createTenant(), off.createTenant()]);
});

afterAll(async () => {
  await Promise.all([s?.stop(), off?.stop()]);
});

const FORMATS = ['png', 'jpeg', 'webp'] as const;

async function generate(stack: TestStack, key: string, format: string) {
  const r = await stack.api('/api/images', { key, body: { prompt: `a ${format} fox`, model_id: 'provB-image-2', output_format: format } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.data.images[0].record_id as number;
}

/** An edit (the provider answers PNG: POST /api/edit-image has no output_format; the parent's format is any). */
async function edit(stack: TestStack, key: string, imageId: number) {
  const r = await stack.api('/api/edit-image', { key, body: { image_id: imageId, prompt: 'make it night', model_id: 'provB-image-2' } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.recordId as number;
}

async function fileOf(stack: TestStack, key: string, id: number): Promise<Buffer> {
  const d = await stack.api(`/api/images/${id}`, { key });
  const res = await fetch(d.body.data.fullUrl);
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer());
}

/** c2pa-ts (pure TypeScript, no trust-chain check): the active manifest's validation. */
async function c2paTs(data: Buffer) {
  const asset = JPEG.canRead(data) ? new JPEG(data) : new PNG(data);
  const jumbf = asset.getManifestJUMBF();
  if (!jumbf) throw new Error('no manifest');
  const store = ManifestStore.read(SuperBox.fromBuffer(new Uint8Array(jumbf)));
  const result = await store.validate(asset);
  return { isValid: result.isValid, manifests: store.manifests.length, errors: result.statusEntries.filter((e) => !e.success) };
}

describe('every provider output is signed', () => {
  for (const format of FORMATS) {
    it(`generate in ${format} and its edit: Trusted with the configured root, and PNG/JPEG valid for c2pa-ts`, async () => {
      const generated = await generate(s, t.liveKey, format);
      const edited = await edit(s, t.liveKey, generated);
      for (const id of [generated, edited]) {
        const detail = await s.api(`/api/images/${id}`, { key: t.liveKey });
        expect(detail.body.data.contentCredentials).toEqual({ present: true, validationState: 'Trusted', issuer: 'imagegen development' });
        const c = await s.api(`/api/images/${id}/credentials`, { key: t.liveKey });
        expect(c.status).toBe(200);
        expect(c.body.data).toMatchObject({ imageId: id, present: true, validationState: 'Trusted', issuer: 'imagegen development' });
        const store = c.body.data.manifestStore;
        expect(Object.keys(store.manifests)).toHaveLength(id === edited ? 2 : 1);
        expect(JSON.stringify(store.manifests[store.active_manifest].assertions)).toContain('trainedAlgorithmicMedia');
        const served = await fileOf(s, t.liveKey, id);
        if (!served.subarray(0, 4).equals(Buffer.from('RIFF'))) {
          const ts = await c2paTs(served);
          expect(ts.errors).toEqual([]);
          expect(ts.isValid).toBe(true);
          expect(ts.manifests).toBe(id === edited ? 2 : 1);
        }
      }
    });
  }

  it('the prompt is in the manifest only for a tenant whose setting asks for it (credentials_include_prompt)', async () => {
    const prompted = await s.createTenant();
    const manifestOf = async (key: string, id: number) => {
      const c = (await s.api(`/api/images/${id}/credentials`, { key })).body.data;
      expect(c.validationState).toBe('Trusted');
      return JSON.stringify(c.manifestStore.manifests[c.manifestStore.active_manifest]);
    };
    const before = await generate(s, prompted.liveKey, 'png');
    expect(await manifestOf(prompted.liveKey, before)).not.toContain('a png fox');
    const patched = await s.api(`/admin/tenants/${prompted.tenantId}`, {
      admin: true,
      method: 'PATCH',
      body: { credentials_include_prompt: true },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.data.tenant.credentialsIncludePrompt).toBe(true);
    const bad = await s.api(`/admin/tenants/${prompted.tenantId}`, {
      admin: true,
      method: 'PATCH',
      body: { credentials_include_prompt: 'yes' },
    });
    expect(bad.status).toBe(400);
    // Generation caches the tenant for API_KEY_CACHE_TTL_MS unless TenantChanged reached it first: wait for the setting.
    let after = 0;
    await waitFor(async () => {
      after = await generate(s, prompted.liveKey, 'png');
      return (await manifestOf(prompted.liveKey, after)).includes('a png fox');
    });
    expect(await manifestOf(prompted.liveKey, before)).not.toContain('a png fox');
  });

  it('an edit of an edit carries three manifests, each parent an ingredient of the next (c2pa-rs and c2pa-ts)', async () => {
    const first = await generate(s, t.liveKey, 'png');
    const second = await edit(s, t.liveKey, first);
    const third = await edit(s, t.liveKey, second);
    const { manifestStore: store, validationState } = (await s.api(`/api/images/${third}/credentials`, { key: t.liveKey })).body.data;
    expect(validationState).toBe('Trusted');
    expect(Object.keys(store.manifests)).toHaveLength(3);
    const parentOf = (label: string) =>
      store.manifests[label].ingredients?.find((i: { relationship: string }) => i.relationship === 'parentOf')?.active_manifest;
    const secondLabel = parentOf(store.active_manifest);
    expect(parentOf(secondLabel)).toBeTruthy();
    expect((await c2paTs(await fileOf(s, t.liveKey, third))).isValid).toBe(true);
  });

  it('the development chain is kept under DATA_DIR, its key readable by its owner only', () => {
    const dir = join(s.env.DATA_DIR, 'c2pa');
    expect(readFileSync(join(dir, 'root.pem'), 'utf8')).toContain('BEGIN CERTIFICATE');
    expect(readFileSync(join(dir, 'chain.pem'), 'utf8').match(/BEGIN CERTIFICATE/g)).toHaveLength(2);
  });
});

describe('GET /api/images/:id/credentials', () => {
  let id: number;
  beforeAll(async () => {
    id = await generate(s, t.liveKey, 'png');
  });

  it('401 without a key, 400 for a bad id, 404 for an unknown id and for another tenant', async () => {
    expect((await s.api(`/api/images/${id}/credentials`)).status).toBe(401);
    const bad = await s.api('/api/images/abc/credentials', { key: t.liveKey });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('Invalid request payload');
    expect((await s.api('/api/images/999999999/credentials', { key: t.liveKey })).status).toBe(404);
    const theirs = await s.api(`/api/images/${id}/credentials`, { key: other.liveKey });
    expect(theirs.status).toBe(404);
    expect(theirs.body.error).toBe('Image not found');
  });

  it('never answers the signing key', async () => {
    const body = JSON.stringify((await s.api(`/api/images/${id}/credentials`, { key: t.liveKey })).body);
    expect(body).not.toContain('PRIVATE KEY');
    expect(body).not.toContain(readFileSync(join(s.env.DATA_DIR, 'c2pa', 'signer.key'), 'utf8').split('\n')[1]);
  });
});

describe('C2PA_SIGNING=off', () => {
  it('stores the images unsigned and says so; nothing fails', async () => {
    const id = await generate(off, offTenant.liveKey, 'png');
    const edited = await edit(off, offTenant.liveKey, id);
    for (const x of [id, edited]) {
      const detail = await off.api(`/api/images/${x}`, { key: offTenant.liveKey });
      expect(detail.body.data.contentCredentials).toEqual({ present: false, validationState: null, issuer: null });
      const c = await off.api(`/api/images/${x}/credentials`, { key: offTenant.liveKey });
      expect(c.body.data).toEqual({ imageId: x, present: false, validationState: null, issuer: null, manifestStore: null });
    }
  });
});
