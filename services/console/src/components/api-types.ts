/** The shapes of API answers, read from the OpenAPI paths of libs/client (its components have no named schemas). */
import type { paths } from '../api';

type Json<R> = R extends { content: { 'application/json': infer T } } ? T : never;
/** The JSON body of the success answer (200, 201 or 202) of `method` on `path`. */
export type OkBody<P extends keyof paths, M extends 'get' | 'post' | 'patch'> = paths[P][M] extends { responses: infer R }
  ? R extends { 200: infer A }
    ? Json<A>
    : R extends { 201: infer A }
      ? Json<A>
      : R extends { 202: infer A }
        ? Json<A>
        : never
  : never;

export type Image = OkBody<'/api/images', 'get'>['data'][number];
export type CharacterItem = OkBody<'/api/characters', 'get'>['data'][number];
export type Character = OkBody<'/api/characters/{identifier}', 'get'>['data'];
export type ProductItem = OkBody<'/api/products', 'get'>['data'][number];
export type SceneItem = OkBody<'/api/scenes', 'get'>['data'][number];
export type Scene = OkBody<'/api/scenes/{identifier}', 'get'>['data'];
export type StylePreset = OkBody<'/api/style-presets', 'get'>['data'][number];
export type SearchPreset = OkBody<'/api/search-presets', 'get'>['data'][number];
export type BulkDeleteResult = OkBody<'/api/images/delete-bulk', 'post'>['data'];
export type SessionSummary = OkBody<'/api/sessions', 'get'>['data'][number];
export type ExecutionDetail = OkBody<'/api/sessions/{sessionId}/logs', 'get'>['executions'][number];
export type Execution = OkBody<'/api/executions/{executionId}', 'get'>['execution'];
export type Usage = OkBody<'/api/usage', 'get'>['data'];
export type Webhook = OkBody<'/api/webhooks', 'get'>['data'][number];
export type WebhookCreated = OkBody<'/api/webhooks', 'post'>['data'];
export type Delivery = OkBody<'/api/webhooks/{id}/deliveries', 'get'>['data'][number];

/** "1.2 MB" */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} kB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/** A timestamp in the reader's locale. */
export function formatTime(ts: string | null | undefined): string {
  return ts ? new Date(ts).toLocaleString() : '—';
}

/** A log line of an execution (stored or live). */
export interface LogEntryLike {
  timestamp: string;
  message: string;
  level: string;
}
