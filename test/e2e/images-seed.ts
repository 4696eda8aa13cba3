import { crc32, deflateSync } from 'node:zlib';
import { type ImageRecord, LibraryServiceService, type StoreImageRequest } from '@imagegen/contracts/library/v1/library';
import { createClient, internalPrincipal } from '@imagegen/platform';
import type { TestStack } from '../support/stack.js';

/** A StoreImage request of a generated 1:1 PNG in session 'seed-session', with `over` applied. */
export function storeImageRequest(tenantId: string, over: Partial<StoreImageRequest> & { data: Buffer }): StoreImageRequest {
  return {
    tenantId,
    sessionId: 'seed-session',
    mimeType: 'image/png',
    prompt: 'seeded image',
    operation: 'generate',
    aspectRatio: '1:1',
    modelId: 'provA-flash-lite-image',
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

/** Seeds images through the library's StoreImage RPC (the same call generation makes), with sharp-made images. */
export function librarySeeder(s: TestStack) {
  const client = createClient(LibraryServiceService, () => s.stack.ctx.resolve('library'));
  return {
    client,
    async store(
      tenantId: string,
      over: Partial<StoreImageRequest> & { width?: number; height?: number; color?: string } = {},
    ): Promise<ImageRecord> {
      const { width = 64, height = 64, color = '#36c', ...rest } = over;
      const data = rest.data && rest.data.length > 0 ? rest.data : solidPng(width, height, color);
      return client.storeImage(storeImageRequest(tenantId, { ...rest, data }), internalPrincipal(tenantId));
    },
    close: () => client.close(),
  };
}

/** A solid-colour RGB PNG (the e2e package has no sharp; this is all a test image needs). */
export function solidPng(width: number, height: number, color = '#3366cc'): Buffer {
  const hex = color.replace('#', '');
  const full =
    hex.length === 3
      ? hex
          .split('')
          .map((c) => c + c)
          .join('')
      : hex;
  const [r, g, b] = [0, 2, 4].map((i) => Number.parseInt(full.slice(i, i + 2), 16));
  const row = Buffer.alloc(1 + width * 3);
  for (let x = 0; x < width; x++) row.set([r as number, g as number, b as number], 1 + x * 3);
  const raw = Buffer.concat(Array.from({ length: height }, () => row));
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(td) >>> 0);
    return Buffer.concat([len, td, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8); // 8-bit RGB
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}
