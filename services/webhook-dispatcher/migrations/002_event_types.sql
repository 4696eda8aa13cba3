-- Issue 37: webhooks for every event type (generation.*, image.*, quota.*), deliveries keyed by their event's id,
-- and replays.
--
-- Endpoints: no row changes. An endpoint created before this migration keeps exactly the events it subscribed to
-- (quota.warning and/or quota.exceeded): its receiver was written for the quota payload, and a stream of
-- generation and image events it never asked for could fail there, and five failed attempts in a row would
-- disable the endpoint and with it the quota alerts it exists for. Its owner opts in to the new types with
-- PATCH /api/webhooks/:id {events}. New endpoints subscribe to every type unless they choose some.

-- The event's id: the webhook-id header and the payload's `id`, the same on every attempt, on every endpoint that
-- receives the event and on a replay. NULL in the rows made before: their webhook-id was the delivery's own id,
-- and stays so (a pending retry keeps the header its first attempts carried). No backfill, so no table rewrite.
ALTER TABLE deliveries ADD COLUMN event_id text;
-- A replay (POST /api/webhooks/:id/deliveries/:deliveryId/replay): the delivery it repeats. No foreign key: the
-- original may be pruned first (30-day retention).
ALTER TABLE deliveries ADD COLUMN replay_of uuid;
