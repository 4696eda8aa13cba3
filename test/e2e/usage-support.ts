import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { crc32, deflateSync } from 'node:zlib';

export const MIB = 1024 * 1024;

/** An RGB PNG of random pixels: it does not compress, so its size is about width*height*3 bytes. */
export function noisePng(width: number, height: number): Buffer {
  const raw = Buffer.alloc((1 + width * 3) * height);
  for (let y = 0; y < height; y++) randomBytes(width * 3).copy(raw, y * (1 + width * 3) + 1);
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
  ihdr.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw, { level: 0 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** Serves PNGs on 127.0.0.1 (reachable by the stack's fetches with ALLOW_LOOPBACK_FETCH=1). */
export async function startImageServer() {
  const files = new Map<string, Buffer>();
  const server = http.createServer((req, res) => {
    const body = files.get((req.url ?? '').split('?')[0]);
    if (!body) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': 'image/png', 'content-length': body.length });
    res.end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    /** Publishes `png` at a fresh path; returns its URL. */
    serve(png: Buffer): string {
      const path = `/img-${files.size + 1}-${randomBytes(3).toString('hex')}.png`;
      files.set(path, png);
      return `http://127.0.0.1:${port}${path}`;
    },
    stop: () => new Promise<void>((r) => server.close(() => r())),
  };
}
