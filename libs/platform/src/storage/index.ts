import { join } from 'node:path';
import { createFsStorage } from './fs.js';
import { createS3Storage } from './s3.js';
import { tracedStorage } from './traced.js';
import type { ObjectStorage } from './types.js';

export { createFsStorage, type FsStorageOptions } from './fs.js';
export { isPlainKey, MAX_KEY_LENGTH, PLAIN_KEY_SQL, tenantKey, validateKey } from './keys.js';
export { createS3Storage, type S3StorageOptions } from './s3.js';
export { tracedStorage } from './traced.js';
export type { ObjectStorage, ObjectStream, PutOptions } from './types.js';

export interface StorageConfig {
  s3Endpoint?: string;
  s3AccessKey?: string;
  s3SecretKey?: string;
  s3Bucket?: string;
  s3PublicUrl?: string;
  dataDir: string;
  publicBaseUrl: string;
}

export const DEFAULT_BUCKET = 'imagegen';

/**
 * S3 when S3_ENDPOINT is set, else plain files under `$DATA_DIR/objects` (ARCHITECTURE: one variable swaps the
 * default); each call traced while telemetry runs.
 */
export function createStorage(cfg: StorageConfig): ObjectStorage {
  return tracedStorage(createBackend(cfg));
}

function createBackend(cfg: StorageConfig): ObjectStorage {
  if (cfg.s3Endpoint) {
    return createS3Storage({
      endPoint: cfg.s3Endpoint,
      accessKey: cfg.s3AccessKey ?? '',
      secretKey: cfg.s3SecretKey ?? '',
      bucket: cfg.s3Bucket || DEFAULT_BUCKET,
      publicUrl: cfg.s3PublicUrl || undefined,
    });
  }
  return createFsStorage({ dir: join(cfg.dataDir, 'objects'), publicBaseUrl: cfg.publicBaseUrl });
}
