import type { Readable } from 'node:stream';
import yazl from 'yazl';

export interface ZipEntry {
  name: string;
  size: number;
  mtime: Date;
  open(): Promise<NodeJS.ReadableStream>;
}

/**
 * A streamed ZIP (yazl) for POST /api/images/download. Entries are stored, not deflated (images are
 * compressed already), and opened one at a time as the archive is read. Because every size is known,
 * yazl reports the exact archive size up front so the response carries a Content-Length; ZIP64 is used
 * automatically when an archive needs it.
 */
export function zipStream(entries: ZipEntry[]): { stream: Readable; size: Promise<number> } {
  const zip = new yazl.ZipFile();
  for (const e of entries) {
    zip.addReadStreamLazy(e.name, { mtime: e.mtime, compress: false, size: e.size }, (cb) => {
      e.open().then(
        (s) => cb(null, s as Readable),
        (err) => cb(err as Error, undefined as unknown as Readable),
      );
    });
  }
  const size = new Promise<number>((resolve) =>
    zip.end({ forceZip64Format: false, comment: '' }, ((total: number) => resolve(total)) as unknown as () => void),
  );
  return { stream: zip.outputStream as unknown as Readable, size };
}
