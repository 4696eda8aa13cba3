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
 *
 * Failure ends this download only, never the process: yazl reports a failed entry (a file deleted after
 * the response started, a storage stream that breaks, a size that no longer matches) as an 'error' event on
 * the ZipFile, which nothing else listens to; here every such error, and every entry stream's own error,
 * destroys the output stream with it (the route's reply then destroys the response: the client sees a cut
 * connection, short of Content-Length). When the output goes away first (the client left), the entry being
 * read is destroyed and no further entry is opened, so no file handle or storage request is left behind.
 */
export function zipStream(entries: ZipEntry[]): { stream: Readable; size: Promise<number> } {
  const zip = new yazl.ZipFile();
  const output = zip.outputStream as unknown as Readable;
  let current: Readable | undefined;
  let done = false;
  const fail = (err: Error) => {
    if (!output.destroyed) output.destroy(err);
  };
  zip.on('error', fail);
  output.once('close', () => {
    done = true;
    if (current && !current.destroyed) current.destroy();
    current = undefined;
  });
  for (const e of entries) {
    zip.addReadStreamLazy(e.name, { mtime: e.mtime, compress: false, size: e.size }, (cb) => {
      if (done) return cb(new Error('download closed'), undefined as unknown as Readable);
      e.open().then(
        (s) => {
          const r = s as Readable;
          r.on('error', fail);
          if (done) {
            r.destroy();
            return cb(new Error('download closed'), undefined as unknown as Readable);
          }
          current = r;
          r.once('close', () => {
            if (current === r) current = undefined;
          });
          cb(null, r);
        },
        (err) => cb(err as Error, undefined as unknown as Readable),
      );
    });
  }
  const size = new Promise<number>((resolve, reject) => {
    output.once('error', reject);
    zip.end({ forceZip64Format: false, comment: '' }, ((total: number) => resolve(total)) as unknown as () => void);
  });
  // The size is awaited before the stream is sent; a failure after that must not be an unhandled rejection.
  size.catch(() => {});
  return { stream: output, size };
}
