import { randomBytes } from 'node:crypto';
import { constants, createWriteStream } from 'node:fs';
import { access, type FileHandle, mkdir, open, readFile, realpath, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { basename, dirname, join, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { contentTypeFromKey } from './content-type.js';
import { encodeKeyPath, isPlainKey, objectNotFound, trimTrailingSlash, validateKey } from './keys.js';
import type { ObjectStorage, ObjectStream } from './types.js';

export interface FsStorageOptions {
  dir: string;
  publicBaseUrl: string;
}

// Errors meaning "no object at this key" (ENOTDIR: a parent segment is a file; EISDIR: key is a prefix).
const MISSING = new Set(['ENOENT', 'ENOTDIR', 'EISDIR']);
const isMissing = (e: unknown): boolean => MISSING.has((e as NodeJS.ErrnoException)?.code ?? '');
const isEnoent = (e: unknown): boolean => (e as NodeJS.ErrnoException)?.code === 'ENOENT';
const isEnotdir = (e: unknown): boolean => (e as NodeJS.ErrnoException)?.code === 'ENOTDIR';

/** How many created directories put() remembers (it skips mkdir for them). */
const MAX_KNOWN_DIRS = 10_000;

/** Objects as plain files under `dir/<key>`; the content type in a hidden sidecar `.<name>.ct`. */
export function createFsStorage(opts: FsStorageOptions): ObjectStorage {
  const root = opts.dir;
  const base = trimTrailingSlash(opts.publicBaseUrl);
  const pathOf = (key: string): string => join(root, validateKey(key));
  const sidecarOf = (path: string): string => join(dirname(path), `.${basename(path)}.ct`);

  // Directories put() has created or found, so a put into a known directory costs no mkdir. A directory
  // removed behind our back (e.g. by hand) is noticed as ENOENT on the temp file, created again, retried.
  const knownDirs = new Set<string>();
  async function ensureDir(dir: string): Promise<void> {
    if (knownDirs.has(dir)) return;
    await mkdir(dir, { recursive: true });
    if (knownDirs.size >= MAX_KNOWN_DIRS) knownDirs.clear();
    knownDirs.add(dir);
  }

  // Temp file + rename, so readers never see a half-written object.
  async function writeAtomic(path: string, data: Buffer | string): Promise<void> {
    const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
    try {
      await writeInKnownDir(tmp, data);
      await rename(tmp, path);
    } catch (e) {
      await rm(tmp, { force: true });
      throw e;
    }
  }

  /** writeFile into a directory ensureDir() made; one removed behind our back is made again and the write retried. */
  async function writeInKnownDir(path: string, data: Buffer | string): Promise<void> {
    try {
      await writeFile(path, data);
    } catch (e) {
      const dir = dirname(path);
      if (!isEnoent(e) || !knownDirs.has(dir)) throw e;
      knownDirs.delete(dir);
      await ensureDir(dir);
      await writeFile(path, data);
    }
  }

  async function unlinkIfPresent(path: string): Promise<void> {
    try {
      await unlink(path);
    } catch (e) {
      if (!isEnoent(e)) throw e;
    }
  }

  // Reads only follow a symbolic link that stays under the root (the root itself may be one, e.g. a mounted
  // volume): a link planted in the tree must not serve /etc/passwd or another deployment's files at /files/*.
  let realRoot: string | undefined;
  async function readablePath(path: string): Promise<string> {
    const real = await realpath(path); // ENOENT/ENOTDIR when missing
    realRoot ??= await realpath(root);
    if (!real.startsWith(realRoot + sep)) throw Object.assign(new Error('object outside the storage root'), { code: 'ENOENT' });
    return real;
  }

  async function contentTypeOf(key: string, path: string): Promise<string> {
    try {
      return (await readFile(await readablePath(sidecarOf(path)), 'utf8')).trim() || contentTypeFromKey(key);
    } catch (e) {
      if (isMissing(e)) return contentTypeFromKey(key);
      throw e;
    }
  }

  async function removeOne(key: string): Promise<void> {
    const path = pathOf(key);
    // force ignores ENOENT only; a parent segment that is a file (ENOTDIR) also means no object is there.
    const removing = (p: string) => rm(p, { force: true }).catch((e) => (isEnotdir(e) ? undefined : Promise.reject(e)));
    await removing(path);
    await removing(sidecarOf(path));
  }

  return {
    kind: 'fs',

    async put(key, data, contentType, opts) {
      const path = pathOf(key);
      await ensureDir(dirname(path));
      // Sidecar first: a concurrent reader may see the new type with the old bytes, never a missing type.
      // A type the key's extension already implies (the usual case: image/png for .png) needs no sidecar,
      // readers fall back to it; only a stale one from an earlier put of another type is removed.
      const sidecar = sidecarOf(path);
      if (contentType === contentTypeFromKey(key)) {
        if (!opts?.fresh) await unlinkIfPresent(sidecar);
      } else await writeAtomic(sidecar, contentType);
      // A fresh key is unknown to every reader until put() resolves (its row is written after, or is a pending
      // row nothing reads before its store answered), so the bytes go straight to their place: no temp file,
      // no rename. A write cut short by a crash leaves a file that the caller's object_gc entry (or discarded
      // pending row) removes.
      if (opts?.fresh) await writeInKnownDir(path, data);
      else await writeAtomic(path, data);
    },

    async putStream(key, data, contentType) {
      const path = pathOf(key);
      await ensureDir(dirname(path));
      if (contentType !== contentTypeFromKey(key)) await writeAtomic(sidecarOf(path), contentType);
      const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
      try {
        await pipeline(data, createWriteStream(tmp));
        await rename(tmp, path);
        return (await stat(path)).size;
      } catch (e) {
        await rm(tmp, { force: true });
        throw e;
      }
    },

    async get(key) {
      const path = pathOf(key);
      try {
        return await readFile(await readablePath(path));
      } catch (e) {
        if (isMissing(e)) throw objectNotFound();
        throw e;
      }
    },

    async getStream(key) {
      const path = pathOf(key);
      // Open first so a missing key fails here with 404 rather than later as a stream error.
      let handle: FileHandle;
      try {
        handle = await open(await readablePath(path), constants.O_RDONLY | constants.O_NOFOLLOW);
      } catch (e) {
        if (isMissing(e)) throw objectNotFound();
        throw e;
      }
      if (!(await handle.stat()).isFile()) {
        await handle.close();
        throw objectNotFound();
      }
      return handle.createReadStream() as unknown as ObjectStream;
    },

    async stat(key) {
      const path = pathOf(key);
      try {
        const st = await stat(await readablePath(path));
        if (!st.isFile()) return null;
        return { size: st.size, contentType: await contentTypeOf(key, path) };
      } catch (e) {
        if (isMissing(e)) return null;
        throw e;
      }
    },

    async delete(key) {
      await removeOne(key);
    },

    async deleteMany(keys) {
      keys.forEach(validateKey); // refuse the whole batch before touching anything
      for (let i = 0; i < keys.length; i += 32) {
        await Promise.all(keys.slice(i, i + 32).map(removeOne));
      }
    },

    // Plain keys (all the services make) skip validation and encoding: they need neither.
    publicUrl(key) {
      return isPlainKey(key) ? `${base}/files/${key}` : `${base}/files/${encodeKeyPath(validateKey(key))}`;
    },
    plainKeyUrlPrefix: `${base}/files/`,

    async healthy() {
      try {
        await mkdir(root, { recursive: true });
        await access(root, constants.R_OK | constants.W_OK);
        return true;
      } catch {
        return false;
      }
    },
  };
}
