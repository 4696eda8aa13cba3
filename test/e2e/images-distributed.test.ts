import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ImageDeleted, ImageStored } from '@imagegen/contracts/events/v1/events';
import { LibraryServiceService } from '@imagegen/contracts/library/v1/library';
import { createClient, internalPrincipal } from '@imagegen/platform';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Api, createApi } from '../support/api.js';
import { freePort, type ServiceProcesses, startServiceProcesses, waitForUrl } from '../support/processes.js';
import { solidPng, storeImageRequest } from './images-seed.js';

/**
 * The distributed shape for the image library: tenancy, library and the gateway as separate processes
 * (standalone entries) on the machine's PostgreSQL and NATS JetStream, objects on a shared filesystem
 * directory that the gateway serves under /files. ImageStored / ImageDeleted arrive over JetStream.
 */
let split: ServiceProcesses;
let api: Api;
let baseUrl: string;
let libraryAddr: string;
let dataDir: string;
const seen: { subject: string; data: Uint8Array }[] = [];
const prefix = `dimg${randomBytes(4).toString('hex')}`;
const adminToken = `adm_${randomBytes(16).toString('hex')}`;

beforeAll(async () => {
  split = await startServiceProcesses({
    name: 'dimg',
    eventsPrefix: prefix,
    subjects: [`${prefix}.library.>`],
    handler: async (m) => {
      seen.push({ subject: m.subject, data: m.data });
    },
  });
  dataDir = mkdtempSync(join(tmpdir(), 'imagegen-dimg-'));
  const [tenancyGrpc, tenancyOps, libraryGrpc, libraryOps, gatewayPort] = await Promise.all(Array.from({ length: 5 }, () => freePort()));
  baseUrl = `http://127.0.0.1:${gatewayPort}`;
  api = createApi(baseUrl);
  libraryAddr = `127.0.0.1:${libraryGrpc}`;
  const common = {
    DATABASE_URL: split.db.url,
    NATS_URL: split.natsUrl,
    EVENTS_PREFIX: prefix,
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    PUBLIC_BASE_URL: baseUrl,
  };
  split.run('services/tenancy/src/main.ts', {
    ...common,
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: String(tenancyGrpc),
    HTTP_PORT: String(tenancyOps),
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
  });
  split.run('services/library/src/main.ts', {
    ...common,
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: String(libraryGrpc),
    HTTP_PORT: String(libraryOps),
    USAGE_ADDR: '127.0.0.1:1',
  });
  await Promise.all([waitForUrl(`http://127.0.0.1:${tenancyOps}/readyz`), waitForUrl(`http://127.0.0.1:${libraryOps}/readyz`)]);
  split.run('services/gateway/src/main.ts', {
    ...common,
    PORT: String(gatewayPort),
    TENANCY_ADDR: `127.0.0.1:${tenancyGrpc}`,
    LIBRARY_ADDR: libraryAddr,
    ADMIN_TOKEN: adminToken,
  });
  await waitForUrl(`${baseUrl}/health`);
}, 180_000);

afterAll(async () => {
  await split?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

it('stores, lists, serves, zips and deletes images across processes with events on JetStream', async () => {
  const tenantId = `d${randomBytes(3).toString('hex')}`;
  const created = await api('/admin/tenants', {
    headers: { 'x-admin-token': adminToken },
    body: { tenant_id: tenantId, tenant_name: 'Dist images', contact_email: 'd@example.com', provider_credentials: { provA: 'a1' } },
  });
  expect(created.status).toBe(200);
  const key = created.body.data.apiKeys.find((k: { type: string }) => k.type === 'live').apiKey;
  const headers = { 'x-api-key': key };

  const library = createClient(LibraryServiceService, libraryAddr);
  const png = solidPng(90, 60, '#c63');
  const rec = await library.storeImage(
    storeImageRequest(tenantId, { sessionId: 'dist-session', data: png, prompt: 'distributed fox', aspectRatio: '3:2' }),
    internalPrincipal(tenantId),
  );
  library.close();
  expect(rec.fullUrl).toBe(`${baseUrl}/files/${rec.objectKey}`);

  const list = await api('/api/images', { headers });
  expect(list.status).toBe(200);
  expect(list.body.data.map((i: { id: number }) => i.id)).toEqual([rec.id]);
  expect(list.body.pagination).toEqual({ total: 1, limit: 20, offset: 0, totalIsExact: true, nextCursor: null });

  const file = await fetch(rec.fullUrl);
  expect(file.status).toBe(200);
  expect(Buffer.from(await file.arrayBuffer()).equals(png)).toBe(true);

  const zip = await fetch(`${baseUrl}/api/images/download`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ imageIds: [rec.id] }),
  });
  expect(zip.status).toBe(200);
  const buf = Buffer.from(await zip.arrayBuffer());
  expect(buf.subarray(0, 4).readUInt32LE(0)).toBe(0x04034b50);
  expect(buf.includes(png)).toBe(true);

  const session = await api('/api/sessions/dist-session', { headers });
  expect(session.body.data.session).toMatchObject({ session_id: 'dist-session', tenant_id: tenantId, is_active: 1 });

  const del = await fetch(`${baseUrl}/api/images/${rec.id}`, { method: 'DELETE', headers });
  expect(del.status).toBe(204);
  expect((await fetch(rec.fullUrl)).status).toBe(404);

  await expect
    .poll(() => seen.map((e) => e.subject), { timeout: 15_000 })
    .toEqual([`${prefix}.library.image_stored`, `${prefix}.library.image_deleted`]);
  expect(ImageStored.decode(seen[0]?.data as Uint8Array)).toMatchObject({
    tenantId,
    imageId: rec.id,
    sizeBytes: png.length,
    sessionId: 'dist-session',
  });
  expect(ImageDeleted.decode(seen[1]?.data as Uint8Array)).toMatchObject({ tenantId, imageId: rec.id, storedAt: rec.createdAt });
});
