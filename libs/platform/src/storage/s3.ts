import { type Readable, Transform } from 'node:stream';
import { Client } from 'minio';
import { DEFAULT_CONTENT_TYPE } from './content-type.js';
import { encodeKeyPath, isPlainKey, objectNotFound, trimTrailingSlash, validateKey } from './keys.js';
import type { ObjectStorage, ObjectStream } from './types.js';

export interface S3StorageOptions {
  /** Full URL, e.g. http://127.0.0.1:9000 */
  endPoint: string;
  accessKey: string;
  secretKey: string;
  bucket: string;
  publicUrl?: string;
  region?: string;
}

const NOT_FOUND_CODES = new Set(['NoSuchKey', 'NotFound', 'NoSuchObject']);
const isNotFound = (e: unknown): boolean => NOT_FOUND_CODES.has((e as { code?: string })?.code ?? '');
const ALREADY_EXISTS_CODES = new Set(['BucketAlreadyOwnedByYou', 'BucketAlreadyExists']);

export function createS3Storage(opts: S3StorageOptions): ObjectStorage {
  const url = new URL(opts.endPoint);
  const useSSL = url.protocol === 'https:';
  const region = opts.region ?? 'us-east-1';
  const client = new Client({
    endPoint: url.hostname.replace(/^\[|\]$/g, ''),
    port: url.port ? Number(url.port) : useSSL ? 443 : 80,
    useSSL,
    accessKey: opts.accessKey,
    secretKey: opts.secretKey,
    region, // a fixed region spares minio a GetBucketLocation round trip
    pathStyle: true,
  });
  const bucket = opts.bucket;
  const base = trimTrailingSlash(opts.publicUrl ?? `${trimTrailingSlash(opts.endPoint)}/${bucket}`);

  // Created lazily, once; a failed attempt is forgotten so the next call retries.
  let bucketReady: Promise<void> | undefined;
  function ensureBucket(): Promise<void> {
    bucketReady ??= (async () => {
      if (await client.bucketExists(bucket)) return;
      try {
        await client.makeBucket(bucket, region);
      } catch (e) {
        if (!ALREADY_EXISTS_CODES.has((e as { code?: string })?.code ?? '')) throw e;
      }
    })().catch((e) => {
      bucketReady = undefined;
      throw e;
    });
    return bucketReady;
  }

  async function open(key: string) {
    validateKey(key);
    await ensureBucket();
    try {
      return await client.getObject(bucket, key);
    } catch (e) {
      if (isNotFound(e)) throw objectNotFound();
      throw e;
    }
  }

  return {
    kind: 's3',

    async put(key, data, contentType) {
      validateKey(key);
      await ensureBucket();
      await client.putObject(bucket, key, data, data.length, { 'Content-Type': contentType });
    },

    async putStream(key, data, contentType) {
      validateKey(key);
      await ensureBucket();
      // Unknown length: the client uploads it in parts (multipart), completed only when the stream ended whole.
      let size = 0;
      const counted = (data as Readable).pipe(
        new Transform({
          transform(chunk: Buffer, _enc, cb) {
            size += chunk.length;
            cb(null, chunk);
          },
        }),
      );
      (data as Readable).once('error', (err) => counted.destroy(err));
      await client.putObject(bucket, key, counted, undefined, { 'Content-Type': contentType });
      return size;
    },

    async get(key) {
      const chunks: Buffer[] = [];
      for await (const chunk of await open(key)) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks);
    },

    async getStream(key) {
      return (await open(key)) as ObjectStream;
    },

    async stat(key) {
      validateKey(key);
      await ensureBucket();
      try {
        const st = await client.statObject(bucket, key);
        const contentType = st.metaData['content-type'];
        return { size: st.size, contentType: typeof contentType === 'string' ? contentType : DEFAULT_CONTENT_TYPE };
      } catch (e) {
        if (isNotFound(e)) return null;
        throw e;
      }
    },

    async delete(key) {
      validateKey(key);
      await ensureBucket();
      await client.removeObject(bucket, key); // S3 answers 204 for a missing key too
    },

    async deleteMany(keys) {
      keys.forEach(validateKey);
      if (keys.length === 0) return;
      await ensureBucket();
      const results = await client.removeObjects(bucket, keys);
      const failed = results.filter((r) => r?.Error && !NOT_FOUND_CODES.has(r.Error.Code ?? ''));
      if (failed.length > 0) {
        const first = failed[0]?.Error;
        throw new Error(`S3 deleteMany failed for ${failed.length} key(s): ${first?.Key} ${first?.Code} ${first?.Message}`);
      }
    },

    publicUrl(key) {
      return isPlainKey(key) ? `${base}/${key}` : `${base}/${encodeKeyPath(validateKey(key))}`;
    },
    plainKeyUrlPrefix: `${base}/`,

    async healthy() {
      try {
        await ensureBucket();
        return await client.bucketExists(bucket);
      } catch {
        return false;
      }
    },
  };
}
