import { createHash } from 'node:crypto';
import sharp, { type Sharp } from 'sharp';

/**
 * Deterministic pictures for the sandbox upstream: a background colour derived from the prompt, the
 * prompt's words written on it (SVG text rendered by sharp/librsvg), optionally over the first input
 * image (edits). Same inputs, same bytes.
 */

export type OutputFormat = 'png' | 'jpeg' | 'webp';

/** provA (Gemini-style) output sizes at the 1K tier; 2K doubles, 4K quadruples, 0.5K halves. */
export const PROVA_1K: Record<string, [number, number]> = {
  '1:1': [1024, 1024],
  '2:3': [848, 1264],
  '3:2': [1264, 848],
  '3:4': [896, 1200],
  '4:3': [1200, 896],
  '4:5': [928, 1152],
  '5:4': [1152, 928],
  '9:16': [768, 1376],
  '16:9': [1376, 768],
  '21:9': [1584, 672],
};

export const PROVA_TIERS: Record<string, number> = { '512': 0.5, '0.5K': 0.5, '1K': 1, '2K': 2, '4K': 4 };

export function provADimensions(aspectRatio: string, imageSize: string): { width: number; height: number } | undefined {
  const base = PROVA_1K[aspectRatio];
  const factor = PROVA_TIERS[imageSize];
  if (!base || !factor) return undefined;
  return { width: Math.round(base[0] * factor), height: Math.round(base[1] * factor) };
}

/** provB (images-API-style) size rules: WxH, both multiples of 16, max edge 3840, ratio <= 3:1, 655,360-8,294,400 px. */
export function provBSizeProblem(width: number, height: number): string | undefined {
  if (width % 16 !== 0 || height % 16 !== 0) return 'both edges must be multiples of 16';
  if (Math.max(width, height) > 3840) return 'the longest edge must be at most 3840';
  if (Math.max(width, height) / Math.min(width, height) > 3) return 'the aspect ratio must be at most 3:1';
  const px = width * height;
  if (px < 655_360 || px > 8_294_400) return 'the total pixels must be between 655360 and 8294400';
  return undefined;
}

const escapeXml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c] as string);

/** The words shown in the picture: the prompt without sandbox directives, collapsed whitespace. */
export function visibleText(prompt: string): string {
  return prompt
    .replace(/\[\[[^\]]*\]\]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

function wrap(text: string, perLine: number, maxLines: number): string[] {
  const lines: string[] = [];
  let cur = '';
  for (const word of text.split(' ')) {
    const w = word.length > perLine ? `${word.slice(0, perLine - 1)}…` : word;
    if (!cur) cur = w;
    else if (cur.length + 1 + w.length <= perLine) cur += ` ${w}`;
    else {
      lines.push(cur);
      cur = w;
      if (lines.length === maxLines) break;
    }
  }
  if (cur && lines.length < maxLines) lines.push(cur);
  return lines;
}

export interface RenderInput {
  width: number;
  height: number;
  format: OutputFormat;
  text: string;
  transparent?: boolean;
  /** Quality 0-100 for jpeg/webp. */
  quality?: number;
  /** First input image (edits): becomes the background. */
  base?: Buffer;
  /** Index of the picture within one request (n > 1): shifts the colours so variants differ. */
  variant?: number;
}

function svgFor(i: RenderInput, withBackground: boolean): Buffer {
  const hash = createHash('sha256').update(i.text).digest();
  const hue = ((hash[0] * 360) / 256 + (i.variant ?? 0) * 47) % 360;
  const fontSize = Math.max(10, Math.round(Math.min(i.width, i.height) / 16));
  const perLine = Math.max(4, Math.floor((i.width - fontSize) / (fontSize * 0.62)));
  const maxLines = Math.max(1, Math.floor((i.height - fontSize) / (fontSize * 1.3)));
  const lines = wrap(i.text || '(empty prompt)', perLine, maxLines);
  const top = Math.max(fontSize, Math.round((i.height - lines.length * fontSize * 1.3) / 2) + fontSize);
  const texts = lines
    .map(
      (l, n) =>
        `<text x="${Math.round(fontSize / 2)}" y="${Math.round(top + n * fontSize * 1.3)}" font-family="DejaVu Sans, sans-serif" font-size="${fontSize}" fill="#ffffff" stroke="#000000" stroke-width="${Math.max(1, Math.round(fontSize / 24))}">${escapeXml(l)}</text>`,
    )
    .join('');
  const bg = withBackground
    ? `<rect width="100%" height="100%" fill="hsl(${hue.toFixed(0)},55%,42%)"/><rect x="0" y="${Math.round(i.height * 0.8)}" width="100%" height="${Math.round(i.height * 0.2)}" fill="hsl(${((hue + 180) % 360).toFixed(0)},50%,35%)"/>`
    : '';
  return Buffer.from(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${i.width}" height="${i.height}" viewBox="0 0 ${i.width} ${i.height}">${bg}${texts}</svg>`,
  );
}

function encode(img: Sharp, i: RenderInput): Promise<Buffer> {
  if (i.format === 'jpeg')
    return img
      .flatten({ background: '#ffffff' })
      .jpeg({ quality: clampQuality(i.quality ?? 90) })
      .toBuffer();
  if (i.format === 'webp') return img.webp({ quality: clampQuality(i.quality ?? 90) }).toBuffer();
  return img.png({ compressionLevel: 3 }).toBuffer();
}

const clampQuality = (q: number) => Math.min(100, Math.max(1, Math.round(q)));

const cache = new Map<string, Buffer>();
const CACHE_MAX = 48;

/** Renders (memoized for inputs without a base image: the output is a pure function of the input). */
export async function renderImage(i: RenderInput): Promise<Buffer> {
  const key = i.base
    ? undefined
    : JSON.stringify([i.width, i.height, i.format, i.text, !!i.transparent, i.quality ?? null, i.variant ?? 0]);
  if (key) {
    const hit = cache.get(key);
    if (hit) {
      cache.delete(key);
      cache.set(key, hit);
      return hit;
    }
  }
  let img: Sharp;
  if (i.base) {
    const base = await sharp(i.base).rotate().resize(i.width, i.height, { fit: 'cover' }).ensureAlpha().toBuffer();
    img = sharp(base).composite([{ input: svgFor(i, false), top: 0, left: 0 }]);
  } else if (i.transparent && i.format !== 'jpeg') {
    img = sharp({ create: { width: i.width, height: i.height, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 0 } } }).composite([
      { input: svgFor(i, false), top: 0, left: 0 },
    ]);
  } else {
    img = sharp(svgFor(i, true));
  }
  const out = await encode(img, i);
  if (key) {
    cache.set(key, out);
    if (cache.size > CACHE_MAX) cache.delete(cache.keys().next().value as string);
  }
  return out;
}
