import { SpanKind, withSpanInTrace } from '../telemetry.js';
import type { ObjectStorage, PutOptions } from './types.js';

/**
 * Object storage with one CLIENT span per call (`storage put`, `storage get`, ...; attributes: backend and
 * key, never the data) inside a traced operation (like the SQL spans: background work without an active
 * span makes no root spans of its own); without tracing the calls go straight through.
 */
export function tracedStorage(inner: ObjectStorage): ObjectStorage {
  const traced =
    <A extends unknown[], R>(op: string, fn: (...args: A) => Promise<R>, keyOf: (...args: A) => Record<string, string | number>) =>
    (...args: A): Promise<R> =>
      withSpanInTrace(
        `storage ${op}`,
        { kind: SpanKind.CLIENT, attributes: { 'imagegen.storage.backend': inner.kind, ...keyOf(...args) } },
        () => fn(...args),
      );
  const key = (k: string) => ({ 'imagegen.storage.key': k });
  return {
    kind: inner.kind,
    plainKeyUrlPrefix: inner.plainKeyUrlPrefix,
    put: traced(
      'put',
      (k: string, data: Buffer, type: string, opts?: PutOptions) => inner.put(k, data, type, opts),
      (k, data) => ({ ...key(k), 'imagegen.storage.bytes': data.length }),
    ),
    putStream: traced('put', (k: string, data: NodeJS.ReadableStream, type: string) => inner.putStream(k, data, type), key),
    get: traced('get', (k: string) => inner.get(k), key),
    getStream: traced('get', (k: string) => inner.getStream(k), key),
    stat: traced('stat', (k: string) => inner.stat(k), key),
    delete: traced('delete', (k: string) => inner.delete(k), key),
    deleteMany: traced(
      'delete',
      (ks: string[]) => inner.deleteMany(ks),
      (ks) => ({ 'imagegen.storage.keys': ks.length }),
    ),
    publicUrl: (k) => inner.publicUrl(k),
    healthy: () => inner.healthy(),
  };
}
