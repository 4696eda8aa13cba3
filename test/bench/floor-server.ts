import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createDb } from '@imagegen/platform';
import Fastify from 'fastify';
import { request } from 'undici';

/**
 * The floor of the generate path (`pnpm bench generate-path`): the least a durable service doing the same job
 * must do on this machine, in one process with no services, gRPC or relay between its steps. Per request:
 * fastify parses POST /api/images; one round trip records the execution as running; undici calls the upstream
 * (provB protocol) and the answer is parsed and its base64 decoded; sharp reads the header and renders the
 * 200x200 WebP thumbnail exactly as the library does; the original and the thumbnail are written; one statement
 * stores the image row, completes the execution and writes the ImageStored event to an outbox; the event is
 * handed to a consumer in this process and marked published (a round trip) and counted as usage (a round trip).
 * Four round trips in all, against the stack's eleven. Started as a child process by generate-path.ts, which
 * reads its CPU from /proc like the stack's.
 */
const requireFromLibrary = createRequire(new URL('../../services/library/package.json', import.meta.url));
const sharp: any = requireFromLibrary('sharp');

const env = (name: string) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
};
const upstream = env('UPSTREAM_URL');
const dataDir = env('DATA_DIR');
mkdirSync(join(dataDir, 'originals'), { recursive: true });
mkdirSync(join(dataDir, 'thumbnails'), { recursive: true });

const sql = createDb(env('DATABASE_URL'), { schema: 'public', max: 10, applicationName: 'imagegen-floor' });
await sql.unsafe(`
  CREATE TABLE IF NOT EXISTS floor_executions (id uuid PRIMARY KEY, tenant_id text NOT NULL, status text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(), completed_at timestamptz);
  CREATE TABLE IF NOT EXISTS floor_images (id bigserial PRIMARY KEY, tenant_id text NOT NULL, execution_id uuid NOT NULL,
    object_key text NOT NULL, thumbnail_key text NOT NULL, mime_type text NOT NULL, width int NOT NULL, height int NOT NULL,
    size_bytes bigint NOT NULL, prompt text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
  CREATE TABLE IF NOT EXISTS floor_outbox (id uuid PRIMARY KEY, subject text NOT NULL, payload jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(), published_at timestamptz);
  CREATE TABLE IF NOT EXISTS floor_usage (tenant_id text NOT NULL, month text NOT NULL, images bigint NOT NULL,
    bytes bigint NOT NULL, PRIMARY KEY (tenant_id, month));
`);

interface Stored {
  id: string;
  tenantId: string;
  bytes: number;
}

/** The event's consumer and the relay's mark, off the request's path, as in the stack. */
async function publish(eventId: string, e: Stored) {
  await sql`UPDATE floor_outbox SET published_at = now() WHERE id = ${eventId}`;
  await sql`INSERT INTO floor_usage (tenant_id, month, images, bytes) VALUES (${e.tenantId}, ${new Date().toISOString().slice(0, 7)}, 1, ${e.bytes})
    ON CONFLICT (tenant_id, month) DO UPDATE SET images = floor_usage.images + 1, bytes = floor_usage.bytes + excluded.bytes`;
}

const app = Fastify({ logger: false });
app.post('/api/images', async (req) => {
  const body = req.body as { prompt?: string };
  const tenantId = String(req.headers['x-api-key'] ?? 'anonymous');
  const prompt = String(body.prompt ?? '');
  const executionId = randomUUID();
  await sql`INSERT INTO floor_executions (id, tenant_id, status) VALUES (${executionId}, ${tenantId}, 'running')`;
  const res = await request(`${upstream}/v1/images/generations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-image-1', prompt, n: 1, size: '1024x1024' }),
  });
  const answer = (await res.body.json()) as { data: { b64_json: string }[] };
  const data = Buffer.from(answer.data[0].b64_json, 'base64');
  const meta = await sharp(data).metadata();
  const thumbnail: Buffer = await sharp(data)
    .rotate()
    .resize(200, 200, { fit: 'inside', withoutEnlargement: true })
    .webp({ quality: 80, effort: 2 })
    .toBuffer();
  const key = randomUUID();
  const objectKey = `originals/${key}.png`;
  const thumbnailKey = `thumbnails/${key}.webp`;
  await Promise.all([writeFile(join(dataDir, objectKey), data), writeFile(join(dataDir, thumbnailKey), thumbnail)]);
  const eventId = randomUUID();
  const [image] = await sql`
    WITH image AS (
      INSERT INTO floor_images (tenant_id, execution_id, object_key, thumbnail_key, mime_type, width, height, size_bytes, prompt)
      VALUES (${tenantId}, ${executionId}, ${objectKey}, ${thumbnailKey}, 'image/png', ${meta.width}, ${meta.height}, ${data.length}, ${prompt})
      RETURNING id, created_at
    ), done AS (
      UPDATE floor_executions SET status = 'completed', completed_at = now() WHERE id = ${executionId}
    ), event AS (
      INSERT INTO floor_outbox (id, subject, payload)
      SELECT ${eventId}, 'library.image_stored', jsonb_build_object('imageId', id, 'tenantId', ${tenantId}::text, 'sizeBytes', ${data.length}::bigint) FROM image
    )
    SELECT id, created_at FROM image`;
  void publish(eventId, { id: String(image.id), tenantId, bytes: data.length }).catch(() => {});
  return {
    data: {
      images: [
        {
          record_id: Number(image.id),
          full_url: `/files/${objectKey}`,
          thumbnail_url: `/files/${thumbnailKey}`,
          mime_type: 'image/png',
          width: meta.width,
          height: meta.height,
          size_bytes: data.length,
          created_at: image.created_at,
        },
      ],
      metadata: { requested: 1, generated: 1 },
      executionId,
    },
  };
});
app.get('/health', async () => ({ status: 'ok' }));

await app.listen({ port: Number(env('PORT')), host: '127.0.0.1' });
const stop = async () => {
  await app.close();
  await sql.end({ timeout: 5 });
  process.exit(0);
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
