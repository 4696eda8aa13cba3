/**
 * Shared helpers of the saved-assets end-to-end tests (characters, products, scenes, style presets,
 * search presets): a local HTTP server serving sharp-made images and non-images (URL fetches run with
 * ALLOW_LOOPBACK_FETCH=1 in the test stack), and library images seeded through the library's StoreImage RPC.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import { type ImageRecord, LibraryServiceService } from '@imagegen/contracts/library/v1/library';
import { createClient, internalPrincipal } from '@imagegen/platform';
import { startTestStack, type TestStack } from '../support/stack.js';
import { storeImageRequest } from './images-seed.js';

// sharp is a dependency of the library service, not of the e2e package: load it from there.
const requireFromLibrary = createRequire(new URL('../../services/library/package.json', import.meta.url));
const sharp: any = requireFromLibrary('sharp');

export async function solidImage(
  width: number,
  height: number,
  format: 'png' | 'jpeg' | 'webp' = 'png',
  color = '#3366cc',
): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: color } })
    [format]()
    .toBuffer();
}

/** An uncompressible PNG of about `bytes` bytes (random pixels, no compression). */
export async function noisePng(bytes: number): Promise<Buffer> {
  const side = Math.max(8, Math.ceil(Math.sqrt(bytes / 3)));
  return sharp(randomBytes(side * side * 3), { raw: { width: side, height: side, channels: 3 } })
    .png({ compressionLevel: 0 })
    .toBuffer();
}

export interface ImageServer {
  url: string;
  /** Requests seen per path (e.g. hits['/a.png']). */
  hits: Record<string, number>;
  /** Serve `body` with `contentType` (and `status`) at `path`. */
  set(path: string, body: Buffer | string, contentType: string, status?: number): void;
  close(): Promise<void>;
}

/** Local server: /red.png, /blue.jpg, /green.webp, /page.html (text/html), /missing (404), /garbage.png (not an image). */
export async function startImageServer(): Promise<ImageServer> {
  const routes = new Map<string, { body: Buffer; type: string; status: number }>();
  const hits: Record<string, number> = {};
  const set: ImageServer['set'] = (path, body, contentType, status = 200) =>
    routes.set(path, { body: Buffer.isBuffer(body) ? body : Buffer.from(body), type: contentType, status });
  set('/red.png', await solidImage(64, 48, 'png', '#cc2222'), 'image/png');
  set('/blue.jpg', await solidImage(40, 40, 'jpeg', '#2222cc'), 'image/jpeg');
  set('/green.webp', await solidImage(30, 60, 'webp', '#22cc22'), 'image/webp');
  set('/page.html', '<html><body>hello</body></html>', 'text/html; charset=utf-8');
  set('/garbage.png', 'definitely not a png', 'image/png');
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    hits[path] = (hits[path] ?? 0) + 1;
    const r = routes.get(path);
    if (!r) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    res.writeHead(r.status, { 'content-type': r.type, 'content-length': r.body.length }).end(r.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    hits,
    set,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Library images of a tenant, stored through LibraryService.StoreImage (as generation does). */
export function seeder(s: TestStack) {
  const client = createClient(LibraryServiceService, () => s.stack.ctx.resolve('library'));
  return {
    async image(
      tenantId: string,
      opts: { data?: Buffer; prompt?: string; operation?: string; characterId?: number } = {},
    ): Promise<ImageRecord> {
      const request = storeImageRequest(tenantId, {
        sessionId: 'assets-seed',
        data: opts.data ?? (await solidImage(32, 32)),
        prompt: opts.prompt ?? 'seeded image',
        operation: opts.operation ?? 'generate',
        characterId: opts.characterId,
      });
      return client.storeImage(request, internalPrincipal(tenantId));
    },
    /** The library record of an image (e.g. to read character_id, which the REST forms do not show). */
    get: (tenantId: string, imageId: number) => client.getImage({ imageId }, internalPrincipal(tenantId)),
    close: () => client.close(),
  };
}

/**
 * The test stack for the assets tests. These tests make many requests per tenant within a minute, so the
 * gateway's rate limits (SPEC 8, RATE_LIMIT_DISABLED in the stack's config) are switched off here; they
 * have their own tests.
 */
export async function startAssetsStack(): Promise<TestStack> {
  return startTestStack({ env: { RATE_LIMIT_DISABLED: '1' } });
}

/** `n` characters of text. */
export const chars = (n: number, c = 'a'): string => c.repeat(n);
