import { crc32, deflateSync } from 'node:zlib';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import {
  AppError,
  guardImage,
  ImageGuardError,
  INPUT_IMAGE_LIMITS,
  PROVIDER_IMAGE_LIMITS,
  readPngHeader,
  sniffFormat,
} from '../src/index.js';

/** A 1-bit greyscale PNG declaring width x height: tiny on the wire, width*height pixels once decoded. */
function bombPng(width: number, height: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([len, body, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 1;
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(Buffer.alloc((1 + Math.ceil(width / 8)) * height), { level: 9 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

const refusal = async (p: Promise<unknown>) => {
  const err = await p.then(
    () => undefined,
    (e) => e,
  );
  expect(err).toBeInstanceOf(ImageGuardError);
  expect(err).toBeInstanceOf(AppError);
  expect((err as AppError).status).toBe(400);
  return err as ImageGuardError;
};

describe('image guard', () => {
  it('accepts PNG, JPEG, WebP and single-frame GIF within the limits, reading format and size', async () => {
    for (const format of ['png', 'jpeg', 'webp', 'gif'] as const) {
      const data = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#336699' } })
        [format]()
        .toBuffer();
      const g = await guardImage(data);
      expect(g).toMatchObject({ format, mimeType: `image/${format}`, width: 64, height: 48, pixels: 3072, bytes: data.length });
    }
  });

  it('refuses a 16000 x 16000 PNG (1 GiB decoded) from its header, fast, with the upload route’s text', async () => {
    const bomb = bombPng(16000, 16000);
    expect(bomb.length).toBeLessThan(1024 * 1024);
    const started = performance.now();
    const rss = process.memoryUsage().rss;
    const err = await refusal(guardImage(bomb));
    expect(performance.now() - started).toBeLessThan(1000);
    expect(process.memoryUsage().rss - rss).toBeLessThan(64 * 1024 * 1024);
    expect(err.reason).toBe('too_many_pixels');
    expect(err.body.error).toBe('Image has too many pixels: 16000 x 16000 = 256,000,000; the maximum is 4,194,304');
    // beyond sharp's own default limit too (16384 x 16384)
    expect((await refusal(guardImage(bombPng(20000, 20000)))).reason).toBe('too_many_pixels');
    // the provider profile has its own bound
    expect((await refusal(guardImage(bomb, { limits: PROVIDER_IMAGE_LIMITS }))).reason).toBe('too_many_pixels');
  });

  it('refuses animated GIFs and WebPs', async () => {
    const frame = (c: string) =>
      sharp({ create: { width: 8, height: 8, channels: 3, background: c } })
        .png()
        .toBuffer();
    const frames = await Promise.all(['#ff0000', '#00ff00', '#0000ff'].map(frame));
    const gif = await sharp(frames, { join: { animated: true } })
      .gif()
      .toBuffer();
    expect((await sharp(gif).metadata()).pages).toBe(3);
    const err = await refusal(guardImage(gif, { contentType: 'image/gif' }));
    expect(err.reason).toBe('animated');
    expect(err.body.error).toBe('Animated images are not supported: the GIF has 3 frames; upload a single-frame image');
    const webp = await sharp(frames, { join: { animated: true } })
      .webp()
      .toBuffer();
    expect((await refusal(guardImage(webp))).body.error).toBe(
      'Animated images are not supported: the WEBP has 3 frames; upload a single-frame image',
    );
  });

  it('refuses other formats before sharp reads them (SVG, TIFF, garbage), naming the Content-Type for URLs', async () => {
    const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>');
    expect(sniffFormat(svg)).toBeUndefined();
    const e1 = await refusal(guardImage(svg, { contentType: 'image/svg+xml' }));
    expect(e1.reason).toBe('unsupported_format');
    expect(e1.body.error).toBe(
      'URL does not point to a supported image (PNG, JPEG, WebP or single-frame GIF). Content-Type: image/svg+xml',
    );
    const tiff = await sharp({ create: { width: 4, height: 4, channels: 3, background: '#000' } })
      .tiff()
      .toBuffer();
    expect((await refusal(guardImage(tiff))).body.error).toBe('Image is not a supported image (PNG, JPEG, WebP or single-frame GIF)');
    // PNG magic with a broken header
    expect((await refusal(guardImage(Buffer.concat([bombPng(1, 1).subarray(0, 8), Buffer.from('broken')])))).reason).toBe(
      'unsupported_format',
    );
  });

  it('refuses more bytes than the limit before looking further', async () => {
    const err = await refusal(guardImage(Buffer.alloc(INPUT_IMAGE_LIMITS.maxBytes + 1)));
    expect(err.reason).toBe('too_large');
    expect(err.body.error).toBe('Image is too large: the upload limit is 20 MB');
  });
});

describe('readPngHeader (the guard reads a PNG header without libvips)', () => {
  const sharpSize = async (data: Buffer) =>
    sharp(data, { limitInputPixels: false })
      .metadata()
      .then(
        (m) => ({ ok: true as const, format: m.format, width: m.width, height: m.height }),
        () => ({ ok: false as const }),
      );

  async function variants(): Promise<Buffer[]> {
    const base = (w: number, h: number, channels: 1 | 2 | 3 | 4) =>
      sharp({ create: { width: w, height: h, channels: channels === 1 || channels === 2 ? 3 : channels, background: '#336699' } });
    return [
      await base(64, 48, 3).png().toBuffer(),
      await base(1, 1, 4).png().toBuffer(),
      await base(300, 7, 3).greyscale().png().toBuffer(),
      await base(33, 65, 4).png({ palette: true }).toBuffer(),
      await base(40, 30, 3).toColourspace('rgb16').png().toBuffer(),
      await base(41, 29, 3).png({ progressive: true }).toBuffer(),
      withTextChunk(await base(50, 20, 3).png().toBuffer()),
      bombPng(16000, 16000),
      bombPng(5, 3),
    ];
  }

  /** The PNG with a tEXt chunk before its pixels (an ancillary chunk the reader walks over, CRC checked). */
  function withTextChunk(png: Buffer): Buffer {
    const body = Buffer.concat([Buffer.from('tEXtComment\0made by a test', 'latin1')]);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(body.length - 4);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([png.subarray(0, 33), len, body, crc, png.subarray(33)]);
  }

  it('answers exactly what sharp reads for well-formed PNGs (colour types, bit depths, palette, interlace)', async () => {
    for (const png of await variants()) {
      const fast = readPngHeader(png);
      expect(fast).toBeDefined();
      expect({ ok: true, format: 'png', ...fast }).toEqual(await sharpSize(png));
    }
  });

  it('leaves to sharp a PNG with EXIF (its orientation may turn it), and anything not a sound header', async () => {
    const oriented = await sharp({ create: { width: 40, height: 20, channels: 3, background: '#000' } })
      .withMetadata({ orientation: 6 })
      .png()
      .toBuffer();
    expect(readPngHeader(oriented)).toBeUndefined();
    expect((await sharp(oriented).metadata()).autoOrient).toMatchObject({ width: 20, height: 40 });
    const png = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#336699' } })
      .png()
      .toBuffer();
    expect(readPngHeader(png.subarray(0, 40))).toBeUndefined(); // truncated before IDAT
    const badCrc = Buffer.from(png);
    badCrc[17] ^= 0x01; // width changed, CRC not
    expect(readPngHeader(badCrc)).toBeUndefined();
    expect(readPngHeader(bombPng(0, 10))).toBeUndefined();
    expect(readPngHeader(bombPng(10_000_001, 1))).toBeUndefined();
    expect(readPngHeader(Buffer.from('not a png at all, but long enough to be read as one............'))).toBeUndefined();
  });

  it('whenever it answers on a damaged PNG, sharp reads the same size (property: 3,000 random mutations)', async () => {
    const sources = [
      ...(await variants()),
      await sharp({ create: { width: 50, height: 20, channels: 3, background: '#000' } })
        .withMetadata({ density: 300 })
        .png()
        .toBuffer(),
    ];
    let seed = 42;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    let answered = 0;
    let cutAnswered = 0; // cut-short inputs it still read (each checked against sharp below)
    for (let i = 0; i < 3000; i++) {
      const src = sources[rand(sources.length)];
      const data = Buffer.from(src);
      // 1-3 bytes changed in the header region (IHDR and the chunks before IDAT), or the data cut short.
      if (rand(10) === 0) {
        const cut = data.subarray(0, 8 + rand(Math.min(120, data.length - 8)));
        const fast = readPngHeader(cut);
        if (!fast) continue;
        cutAnswered++;
        expect({ ok: true, format: 'png', ...fast }).toEqual(await sharpSize(Buffer.from(cut)));
        continue;
      }
      for (let k = 0, n = 1 + rand(3); k < n; k++) data[8 + rand(Math.min(120, data.length - 8))] = rand(256);
      const fast = readPngHeader(data);
      if (!fast) continue;
      answered++;
      expect({ ok: true, format: 'png', ...fast }).toEqual(await sharpSize(data));
    }
    expect(answered).toBeGreaterThan(100); // mutations past the header leave it readable
    expect(cutAnswered).toBeGreaterThan(0); // and the cut-short case was checked at all
  });

  it('the guard gives the same answers through it as through sharp: sizes, pixel limit, no pixels', async () => {
    const png = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#336699' } })
      .png()
      .toBuffer();
    expect(await guardImage(png)).toEqual({ format: 'png', mimeType: 'image/png', width: 64, height: 48, pixels: 3072, bytes: png.length });
    const err = await refusal(guardImage(bombPng(3000, 3000)));
    expect(err.reason).toBe('too_many_pixels');
    expect(err.body.error).toBe('Image has too many pixels: 3000 x 3000 = 9,000,000; the maximum is 4,194,304');
    expect((await guardImage(bombPng(3000, 3000), { limits: PROVIDER_IMAGE_LIMITS })).pixels).toBe(9_000_000);
    // A header it does not vouch for (the width changed, its CRC not): sharp's answer, whatever it is.
    const badCrc = Buffer.from(png);
    badCrc[17] ^= 0x01;
    expect(readPngHeader(badCrc)).toBeUndefined();
    const bySharp = await sharp(badCrc, { limitInputPixels: false }).metadata();
    expect(await guardImage(badCrc, { limits: PROVIDER_IMAGE_LIMITS })).toMatchObject({ width: bySharp.width, height: bySharp.height });
  });
});
