import { internalPrincipal, transportFailure, validateKey } from '@imagegen/platform';
import type { FastifyInstance } from 'fastify';
import type { RouteModule } from '../types.js';

/**
 * GET /files/<key>: objects of ctx.storage, the public URLs of filesystem storage
 * (`${PUBLIC_BASE_URL}/files/<key>`). No credential (the URLs are the images' public URLs; keys carry a
 * random uuid). Objects are never rewritten under the same key, so they are cached for a year. An object whose
 * key awaits removal (a deleted image's files kept for OBJECT_DELETE_GRACE, a store not committed) is not served:
 * the library says so (objectServable).
 */
const CACHE_CONTROL = 'public, max-age=31536000, immutable';

/**
 * Types a browser renders inline without running anything. Any other stored type (image/svg+xml, text/html,
 * a missing or odd sidecar type...) is served as a download: on the API origin an inline SVG or HTML would be
 * stored XSS wherever a browser ignores the CSP sandbox below.
 */
const INLINE_TYPES = new Set(['image/png', 'image/jpeg', 'image/webp', 'image/gif', 'image/avif']);
const isInline = (contentType: string): boolean => INLINE_TYPES.has(contentType.split(';')[0].trim().toLowerCase());

const filesRoutes: RouteModule = (app: FastifyInstance, { ctx, clients }) => {
  /** Whether the library lets the key be served; a library of the previous version (no such call, during a rolling
   * upgrade) removes a deleted image's files at once, so there storage alone answers. */
  const servable = (key: string) =>
    clients.library.objectServable({ objectKey: key }, internalPrincipal()).then(
      (r) => r.servable,
      (err) => {
        if (transportFailure(err)?.code === 'UNIMPLEMENTED') return true;
        throw err;
      },
    );

  app.route({
    method: ['GET', 'HEAD'],
    url: '/files/*',
    config: { auth: 'none' },
    exposeHeadRoute: false,
    schema: { hide: true },
    handler: async (req, reply) => {
      const key = (req.params as { '*': string })['*'];
      const notFound = () => reply.status(404).send({ error: 'File not found' });
      try {
        validateKey(key);
      } catch {
        return notFound();
      }
      const [st, allowed] = await Promise.all([ctx.storage.stat(key), servable(key)]);
      if (!st || !allowed) return notFound();
      let stream: NodeJS.ReadableStream | undefined;
      if (req.method === 'GET') {
        try {
          stream = await ctx.storage.getStream(key);
        } catch (err) {
          if ((err as { status?: number }).status === 404) return notFound();
          throw err;
        }
      }
      reply.header('content-type', st.contentType);
      reply.header('content-length', String(st.size));
      reply.header('cache-control', CACHE_CONTROL);
      reply.header('x-content-type-options', 'nosniff');
      reply.header('content-security-policy', "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox");
      if (!isInline(st.contentType)) reply.header('content-disposition', 'attachment');
      if (!stream) return reply.send();
      return reply.send(stream);
    },
  });
};

export default filesRoutes;
