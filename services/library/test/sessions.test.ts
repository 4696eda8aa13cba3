import type { StoreImageRequest } from '@imagegen/contracts/library/v1/library';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LibraryHarness, makeImage, startLibrary, storeRequest } from './support.js';

let h: LibraryHarness;
let png: Buffer;
beforeAll(async () => {
  h = await startLibrary();
  png = await makeImage(30, 20);
});
afterAll(async () => {
  await h?.stop();
});

const store = (tenantId: string, over: Partial<StoreImageRequest>) =>
  h.client.storeImage(storeRequest({ tenantId, sessionId: 's', data: png, aspectRatio: '3:2', ...over }), h.principal(tenantId));

describe('sessions', () => {
  it('TouchSession creates once, validates the id, reports capacity', async () => {
    const a = await h.client.touchSession({ sessionId: 'new-one', tenantId: '' }, h.principal('tS'));
    expect(a).toEqual({ sessionId: 'new-one', imageCount: 0, remaining: 1000, created: true });
    const b = await h.client.touchSession({ sessionId: 'new-one', tenantId: '' }, h.principal('tS'));
    expect(b.created).toBe(false);
    await expect(h.client.touchSession({ sessionId: '', tenantId: '' }, h.principal('tS'))).rejects.toMatchObject({ status: 400 });
    await expect(h.client.touchSession({ sessionId: 'z'.repeat(201), tenantId: '' }, h.principal('tS'))).rejects.toMatchObject({
      status: 400,
    });
  });

  it('lists with totals, most recently active first; detail lists images oldest first; tenant-scoped', async () => {
    await store('tL', { sessionId: 'one', tokens: 7 });
    await store('tL', { sessionId: 'one', operation: 'edit', tokens: 3 });
    await store('tL', { sessionId: 'two' });
    await store('tL2', { sessionId: 'one' });
    const r = await h.client.listSessions({ limit: 0, offset: 0 }, h.principal('tL'));
    expect(r).toMatchObject({ total: 2, limit: 20, offset: 0 });
    expect(r.sessions.map((x) => x.sessionId)).toEqual(['two', 'one']);
    expect(r.sessions[1]).toMatchObject({
      tenantId: 'tL',
      isActive: true,
      totalImages: 2,
      totalEdits: 1,
      totalBytes: png.length * 2,
      totalTokens: 10,
    });
    const capped = await h.client.listSessions({ limit: 1000, offset: 1 }, h.principal('tL'));
    expect(capped).toMatchObject({ limit: 100, offset: 1 });
    expect(capped.sessions.map((x) => x.sessionId)).toEqual(['one']);

    const d = await h.client.getSession({ sessionId: 'one' }, h.principal('tL'));
    expect(d.session?.totalImages).toBe(2);
    expect(d.images.map((i) => i.operation)).toEqual(['generate', 'edit']);
    const other = await h.client.getSession({ sessionId: 'one' }, h.principal('tL2'));
    expect(other.images).toHaveLength(1);
    await expect(h.client.getSession({ sessionId: 'two' }, h.principal('tL2'))).rejects.toMatchObject({
      status: 404,
      body: { error: 'Session not found' },
    });
    await expect(h.client.getSession({ sessionId: '' }, h.principal('tL'))).rejects.toMatchObject({ status: 404 });
  });
});
