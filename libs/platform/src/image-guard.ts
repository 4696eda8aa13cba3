/**
 * One image guard for every image that enters the platform: uploads for editing, product URLs, scene URL
 * imports, provider results and the references sent to providers. It decides from the first bytes and the
 * header only, before anything is decoded: the size in bytes, the format (magic bytes, then the header
 * sharp/libvips reads: PNG IHDR, JPEG SOF, WebP VP8/VP8L/VP8X, GIF screen and frame count), the pixel
 * count and the number of frames. A 1 MB PNG that declares 16000 x 16000 pixels (1 GiB once decoded) is
 * refused here, without allocating its pixels. The error texts are the upload route's (SPEC 8 limits).
 */
import { crc32 } from 'node:zlib';
import { AppError } from './errors.js';

export type GuardedFormat = 'png' | 'jpeg' | 'webp' | 'gif';

export interface ImageLimits {
  /** Largest accepted encoded size in bytes. */
  maxBytes: number;
  /** Largest accepted width x height (of one frame). */
  maxPixels: number;
}

/** SPEC 8: uploads, product and scene images, references (20 MB, 4,194,304 pixels). */
export const INPUT_IMAGE_LIMITS: ImageLimits = { maxBytes: 20 * 1024 * 1024, maxPixels: 4_194_304 };

/**
 * What a provider may answer: provA's 4K tier is up to 6336 x 2688 (21:9, 17,031,168 px), provB up to
 * 8,294,400 px. Images the platform produced itself (and may send back as edit sources or references) are
 * held to the same bound; anything larger is not a picture we asked for.
 */
export const PROVIDER_IMAGE_LIMITS: ImageLimits = { maxBytes: 64 * 1024 * 1024, maxPixels: 17_040_000 };

export const GUARDED_MIME_TYPES: Record<GuardedFormat, string> = {
  png: 'image/png',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
};

export interface GuardedImage {
  format: GuardedFormat;
  mimeType: string;
  width: number;
  height: number;
  pixels: number;
  bytes: number;
}

export type ImageGuardReason = 'too_large' | 'unsupported_format' | 'animated' | 'no_pixels' | 'too_many_pixels';

/** A refusal: a 400 AppError (the upload route's texts) that also says why, for callers that map it. */
export class ImageGuardError extends AppError {
  constructor(
    readonly reason: ImageGuardReason,
    message: string,
  ) {
    super(400, { error: message });
  }
}

export interface GuardOptions {
  /** Defaults to INPUT_IMAGE_LIMITS. */
  limits?: ImageLimits;
  /** The Content-Type the data came with, when it came from a URL: the refusal of a non-image names it. */
  contentType?: string;
}

const mb = (bytes: number) => `${Math.round(bytes / (1024 * 1024))} MB`;

/** The format the first bytes announce (only the four accepted ones; anything else is undefined). */
export function sniffFormat(data: Uint8Array): GuardedFormat | undefined {
  const b = data;
  if (
    b.length >= 8 &&
    b[0] === 0x89 &&
    b[1] === 0x50 &&
    b[2] === 0x4e &&
    b[3] === 0x47 &&
    b[4] === 0x0d &&
    b[5] === 0x0a &&
    b[6] === 0x1a &&
    b[7] === 0x0a
  )
    return 'png';
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpeg';
  if (
    b.length >= 6 &&
    b[0] === 0x47 &&
    b[1] === 0x49 &&
    b[2] === 0x46 &&
    b[3] === 0x38 &&
    (b[4] === 0x37 || b[4] === 0x39) &&
    b[5] === 0x61
  )
    return 'gif';
  if (
    b.length >= 12 &&
    b[0] === 0x52 &&
    b[1] === 0x49 &&
    b[2] === 0x46 &&
    b[3] === 0x46 &&
    b[8] === 0x57 &&
    b[9] === 0x45 &&
    b[10] === 0x42 &&
    b[11] === 0x50
  )
    return 'webp';
  return undefined;
}

/** PNG IHDR: bit depths allowed for each colour type (PNG spec 11.2.2). */
const PNG_BIT_DEPTHS: Record<number, number[]> = { 0: [1, 2, 4, 8, 16], 2: [8, 16], 3: [1, 2, 4, 8], 4: [8, 16], 6: [8, 16] };
/** libvips refuses a larger width or height (VIPS_MAX_COORD); such a header is left to sharp's answer. */
const VIPS_MAX_COORD = 10_000_000;
/** Chunks walked before giving up on reaching IDAT (a header that long is left to sharp). */
const PNG_MAX_HEADER_CHUNKS = 64;

/**
 * The size of a PNG read from its IHDR chunk, without libvips (sharp's metadata() is a trip through the thread pool,
 * on a generate's critical path), or undefined when this reading cannot be sure to agree with libvips':
 * anything not a well-formed IHDR (libvips refuses those), a width or height libvips refuses, a chunk before
 * IDAT with a wrong CRC or past the end of the data, no IDAT within the first chunks, or an eXIf chunk before
 * it (its orientation may turn the image: sharp's autoOrient). Callers then ask sharp. What this does not
 * check, like libvips' header read, is the content of the ancillary chunks: a PNG whose IHDR is sound but
 * whose pixels or palette are corrupt is refused when it is decoded (the library's 400 'Invalid image data').
 */
export function readPngHeader(data: Uint8Array): { width: number; height: number } | undefined {
  if (data.length < 45 || sniffFormat(data) !== 'png') return undefined; // signature + IHDR + one chunk header
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const type = (at: number) => String.fromCharCode(data[at], data[at + 1], data[at + 2], data[at + 3]);
  const crcOk = (at: number, length: number) => view.getUint32(at + 8 + length) === crc32(data.subarray(at + 4, at + 8 + length));
  if (view.getUint32(8) !== 13 || type(12) !== 'IHDR' || !crcOk(8, 13)) return undefined;
  const width = view.getUint32(16);
  const height = view.getUint32(20);
  const [bitDepth, colourType, compression, filter, interlace] = data.subarray(24, 29);
  if (width < 1 || height < 1 || width > VIPS_MAX_COORD || height > VIPS_MAX_COORD) return undefined;
  if (!PNG_BIT_DEPTHS[colourType]?.includes(bitDepth) || compression !== 0 || filter !== 0 || interlace > 1) return undefined;
  let at = 33;
  for (let i = 0; i < PNG_MAX_HEADER_CHUNKS && at + 8 <= data.length; i++) {
    const length = view.getUint32(at);
    const name = type(at + 4);
    if (length > 0x7fffffff) return undefined; // PNG's bound on a chunk's length
    if (name === 'IDAT') return { width, height };
    if (name === 'eXIf' || name === 'IEND' || at + 12 + length > data.length || !crcOk(at, length)) return undefined;
    at += 12 + length;
  }
  return undefined;
}

type SharpFn = typeof import('sharp').default;
let sharpModule: Promise<SharpFn> | undefined;
// Loaded on first use: processes that never see an image (gateway, tenancy, ...) never load libvips.
const loadSharp = (): Promise<SharpFn> => {
  sharpModule ??= import('sharp').then((m) => m.default);
  return sharpModule;
};

/**
 * Checks an image against the limits from its header, decoding nothing. Resolves with its format and
 * dimensions; throws ImageGuardError (400) with the upload route's text otherwise.
 */
export async function guardImage(data: Buffer, opts: GuardOptions = {}): Promise<GuardedImage> {
  const limits = opts.limits ?? INPUT_IMAGE_LIMITS;
  if (data.length > limits.maxBytes) {
    throw new ImageGuardError('too_large', `Image is too large: the upload limit is ${mb(limits.maxBytes)}`);
  }
  const unsupported = () =>
    new ImageGuardError(
      'unsupported_format',
      opts.contentType !== undefined
        ? `URL does not point to a supported image (PNG, JPEG, WebP or single-frame GIF). Content-Type: ${opts.contentType || 'none'}`
        : 'Image is not a supported image (PNG, JPEG, WebP or single-frame GIF)',
    );
  const sniffed = sniffFormat(data);
  if (!sniffed) throw unsupported();
  const png = sniffed === 'png' ? readPngHeader(data) : undefined;
  if (png) return checkSize(png.width, png.height, sniffed, data.length, limits, opts);
  const sharp = await loadSharp();
  let meta: Awaited<ReturnType<ReturnType<SharpFn>['metadata']>>;
  try {
    // metadata() reads the header only (nothing is decoded), so sharp's own pixel limit is lifted here: the
    // pixel count is compared below with our limit and answered with our text. Whoever decodes afterwards
    // should pass `limitInputPixels` (e.g. imageDecodeOptions()) as a second line.
    meta = await sharp(data, { limitInputPixels: false }).metadata();
  } catch {
    throw unsupported();
  }
  if (meta.format !== sniffed) throw unsupported();
  const pages = meta.pages ?? 1;
  if (pages > 1) {
    throw new ImageGuardError(
      'animated',
      `Animated images are not supported: the ${sniffed === 'gif' ? 'GIF' : sniffed.toUpperCase()} has ${pages} frames; upload a single-frame image`,
    );
  }
  return checkSize(meta.width ?? 0, meta.pageHeight ?? meta.height ?? 0, sniffed, data.length, limits, opts);
}

/** The pixel checks of a header's size (one frame), with the upload route's texts. */
function checkSize(
  width: number,
  height: number,
  format: GuardedFormat,
  bytes: number,
  limits: ImageLimits,
  opts: GuardOptions,
): GuardedImage {
  if (width < 1 || height < 1) {
    const what = opts.contentType !== undefined ? 'URL does not point to a valid image' : 'Image is not a valid image';
    throw new ImageGuardError('no_pixels', `${what}: it has no pixels`);
  }
  const pixels = width * height;
  if (pixels > limits.maxPixels) {
    throw new ImageGuardError(
      'too_many_pixels',
      `Image has too many pixels: ${width} x ${height} = ${pixels.toLocaleString('en-US')}; the maximum is ${limits.maxPixels.toLocaleString('en-US')}`,
    );
  }
  return { format, mimeType: GUARDED_MIME_TYPES[format], width, height, pixels, bytes };
}

/** Options for a sharp pipeline that decodes an image the guard accepted (a second line: libvips refuses more pixels). */
export function imageDecodeOptions(limits: ImageLimits = INPUT_IMAGE_LIMITS): { limitInputPixels: number } {
  return { limitInputPixels: limits.maxPixels };
}
