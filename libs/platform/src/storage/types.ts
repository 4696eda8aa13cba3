export type ObjectStream = NodeJS.ReadableStream & AsyncIterable<Buffer>;

export interface PutOptions {
  /**
   * The key was just made unique (a random uuid in it), nothing was ever stored under it, and nothing names it
   * before put() resolves: the filesystem storage then has no stale content-type sidecar to remove and writes
   * the bytes in place instead of through a temp file and a rename (two syscalls less per object). The caller
   * must have the key scheduled for removal (object_gc) in case the write is cut short.
   */
  fresh?: boolean;
}

/** Where image originals and thumbnails live: the local filesystem (all-in-one) or S3 (MinIO). */
export interface ObjectStorage {
  readonly kind: 'fs' | 's3';
  put(key: string, data: Buffer, contentType: string, opts?: PutOptions): Promise<void>;
  /**
   * Stores a stream of unknown length (a large export ZIP) without holding it in memory; readers see the object
   * only once it is whole (a temp file and a rename, or an S3 multipart upload completed). Resolves to its size.
   */
  putStream(key: string, data: NodeJS.ReadableStream, contentType: string): Promise<number>;
  /** Throws AppError 404 {error:'Object not found'} when the key is missing. */
  get(key: string): Promise<Buffer>;
  /** Same 404 as get(), raised before the stream is returned. */
  getStream(key: string): Promise<ObjectStream>;
  stat(key: string): Promise<{ size: number; contentType: string } | null>;
  /** Deleting a missing key is not an error. */
  delete(key: string): Promise<void>;
  deleteMany(keys: string[]): Promise<void>;
  publicUrl(key: string): string;
  /** publicUrl(key) is this prefix followed by the key itself for every plain key (isPlainKey), e.g. for SQL to build URLs. */
  readonly plainKeyUrlPrefix: string;
  healthy(): Promise<boolean>;
}
