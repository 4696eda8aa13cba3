import type { DeleteImagesBody, DownloadImagesBody, Infer } from '@imagegen/api-schemas';
import { imageCredentialsJson, imageDetailJson, listImagesRequest } from '@imagegen/operations';
import { notFound } from '@imagegen/platform';
import type { FastifyInstance } from 'fastify';
import type { RouteModule } from '../types.js';
import { zipStream } from './images-zip.js';

/**
 * The image library (SPEC 4.1): GET /api/images, GET/DELETE /api/images/:id, POST /api/images/delete-bulk,
 * POST /api/images/download. POST /api/images (generate) lives in routes/generation.ts.
 */

// ---- schemas ----

const DATA_OPEN = Buffer.from('{"data":');

// ---- ZIP download ----

const EXT: Record<string, string> = { png: 'png', jpeg: 'jpg', webp: 'webp', gif: 'gif' };

function zipName(now = new Date()): string {
  const s = now.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  return `images-${s}.zip`;
}

const imagesRoutes: RouteModule = (app: FastifyInstance, { ctx, clients }) => {
  const library = clients.library;

  app.get('/api/images', async (req, reply) => {
    // The library renders the page's JSON itself (as_json): no ImageRecords to decode and re-encode here.
    // A client that goes away cancels the call, and with it the library's SQL (issue 16).
    const gone = new AbortController();
    const onClose = () => {
      if (!reply.raw.writableFinished) gone.abort();
    };
    reply.raw.once('close', onClose);
    const r = await library
      .listImages(listImagesRequest(req.query as Record<string, unknown>, true), req.principal, { signal: gone.signal })
      .finally(() => reply.raw.off('close', onClose));
    const next = r.nextCursor ? JSON.stringify(r.nextCursor) : 'null';
    const pagination = `,"pagination":{"total":${r.total},"limit":${r.limit},"offset":${r.offset},"totalIsExact":${r.totalIsExact},"nextCursor":${next}}}`;
    return reply.type('application/json; charset=utf-8').send(Buffer.concat([DATA_OPEN, r.pageJson, Buffer.from(pagination)]));
  });

  app.get('/api/images/:id', async (req) => {
    const { id } = req.params as { id: number };
    const d = await library.getImage({ imageId: id }, req.principal);
    return { data: imageDetailJson(d) };
  });

  // (extension, issue 39) The whole manifest store, read off the stored file and validated now.
  app.get('/api/images/:id/credentials', async (req) => {
    const { id } = req.params as { id: number };
    return { data: imageCredentialsJson(await library.getImageCredentials({ imageId: id }, req.principal)) };
  });

  app.delete('/api/images/:id', async (req, reply) => {
    const { id } = req.params as { id: number };
    await library.deleteImage({ imageId: id }, req.principal);
    return reply.status(204).send();
  });

  app.post('/api/images/delete-bulk', async (req) => {
    const { ids } = req.body as Infer<typeof DeleteImagesBody>;
    const unique = [...new Set(ids)];
    const r = await library.deleteImages({ imageIds: unique }, req.principal);
    return {
      data: {
        deleted: r.deleted,
        failed: r.failed.map((f) => ({ id: f.id, error: f.error })),
        summary: { total: unique.length, succeeded: r.deleted.length, failed: r.failed.length },
      },
    };
  });

  app.post('/api/images/download', async (req, reply) => {
    const { imageIds } = req.body as Infer<typeof DownloadImagesBody>;
    const r = await library.resolveImages({ imageIds }, req.principal);
    if (r.missingIds.length > 0) throw missing(r.missingIds);
    // Every original must still be in storage: once the ZIP has started the status can no longer change.
    const stats = await Promise.all(r.images.map((img) => ctx.storage.stat(img.objectKey)));
    const lost = r.images.filter((_, i) => !stats[i]).map((img) => img.id);
    if (lost.length > 0) throw missing(lost);
    const entries = r.images.map((img, i) => ({
      name: `image-${img.id}.${EXT[img.format] ?? img.format}`,
      size: (stats[i] as { size: number }).size,
      mtime: new Date(img.createdAt),
      open: () => ctx.storage.getStream(img.objectKey),
    }));
    const { stream, size } = zipStream(entries);
    stream.on('error', (err) => req.log.warn({ err }, 'image download stream failed'));
    const total = await size;
    reply.header('content-type', 'application/zip');
    reply.header('content-disposition', `attachment; filename="${zipName()}"`);
    reply.header('cache-control', 'no-store');
    if (total >= 0) reply.header('content-length', String(total));
    return reply.send(stream);
  });
};

function missing(ids: number[]) {
  const e = notFound('Image not found');
  e.body.details = { missing_ids: ids };
  return e;
}

export default imagesRoutes;
