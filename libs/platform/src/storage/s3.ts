import { Client } from 'minio';

/** The part size of putStream's multipart uploads (S3's minimum is 5 MiB). */
const STREAM_PART_BYTES = 8 * 1024 * 1024;

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
      // A multipart upload of 8 MiB parts, each sent before the next is read (memory: one part), completed only
      // when the stream ended whole; aborted when it failed (nothing appears under the key). A stream shorter than
      // one part is one plain put. S3 allows 10,000 parts: 80 GiB at most.
      const headers = { 'Content-Type': contentType };
      let uploadId: string | undefined;
      const etags: { part: number; etag: string }[] = [];
      let buf: Buffer[] = [];
      let buffered = 0;
      let size = 0;
      const sendPart = async () => {
        const payload = Buffer.concat(buf);
        buf = [];
        buffered = 0;
        uploadId ??= await client.initiateNewMultipartUpload(bucket, key, headers);
        const part = etags.length + 1;
        const r = await client.uploadPart(
          { bucketName: bucket, objectName: key, uploadID: uploadId, partNumber: part, headers: {} },
          payload,
        );
        etags.push({ part, etag: r.etag });
      };
      try {
        for await (const chunk of data as AsyncIterable<Buffer>) {
          buf.push(chunk);
          buffered += chunk.length;
          size += chunk.length;
          if (buffered >= STREAM_PART_BYTES) await sendPart();
        }
        if (uploadId === undefined) {
          await client.putObject(bucket, key, Buffer.concat(buf), buffered, headers);
          return size;
        }
        if (buffered > 0) await sendPart();
        await client.completeMultipartUpload(bucket, key, uploadId, etags);
        return size;
      } catch (e) {
        if (uploadId !== undefined) await client.abortMultipartUpload(bucket, key, uploadId).catch(() => {});
        throw e;
      }
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
