import { createHash } from 'node:crypto';
import type { Infer, SessionListQuery } from '@imagegen/api-schemas';
import type { SessionSummary } from '@imagegen/contracts/library/v1/library';
import { cursorPagination, sessionImageJson, sessionJson, sessionRecordJson } from '@imagegen/operations';
import type { FastifyInstance } from 'fastify';
import type { RouteModule } from '../types.js';

/**
 * Sessions (SPEC 4.8): GET /api/sessions and GET /api/sessions/:sessionId. The /logs routes and
 * executions are in routes/executions.ts.
 */

const CLOSE_DATA = Buffer.from('}}');

/** RFC 9110 13.1.2: If-None-Match holds `*` or a list of entity tags, compared weakly (a W/ prefix is ignored). */
function matchesEtag(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  if (ifNoneMatch.trim() === '*') return true;
  return ifNoneMatch.split(',').some((t) => t.trim().replace(/^W\//, '') === etag);
}

const sessionsRoutes: RouteModule = (app: FastifyInstance, { clients }) => {
  const library = clients.library;

  app.get('/api/sessions', async (req) => {
    const { limit, offset, cursor } = req.query as Infer<typeof SessionListQuery>;
    const r = await library.listSessions({ limit, offset, cursor: cursor || undefined }, req.principal);
    return {
      data: r.sessions.map(sessionJson),
      pagination: cursorPagination(r),
    };
  });

  app.get('/api/sessions/:sessionId', async (req, reply) => {
    const { sessionId } = req.params as { sessionId: string };
    // The library renders the images' JSON itself (as_json): up to 1,000 ImageRecords not decoded and re-encoded here.
    const r = await library.getSession({ sessionId, asJson: true, sessionOnly: false }, req.principal);
    const session = sessionRecordJson(r.session as SessionSummary);
    if (r.imagesJson.length === 0) return { data: { session, images: r.images.map(sessionImageJson) } };
    const sessionText = JSON.stringify(session);
    // The answer is the session record and the images at their version: its ETag names both, so a client polling
    // a session gets 304 and no body (up to ~750 KB) while neither changed.
    const etag = `"${r.imagesVersion}-${createHash('sha256').update(sessionText).digest('base64url').slice(0, 22)}"`;
    reply.header('etag', etag).header('cache-control', 'private, no-cache');
    if (matchesEtag(req.headers['if-none-match'], etag)) return reply.code(304).send();
    const head = Buffer.from(`{"data":{"session":${sessionText},"images":`);
    return reply.type('application/json; charset=utf-8').send(Buffer.concat([head, r.imagesJson, CLOSE_DATA]));
  });
};

export default sessionsRoutes;
