import { TenantChanged } from '@imagegen/contracts/events/v1/events';
import type { Logger } from 'pino';
import { decodeOrSkip } from './consume.js';
import { subjectFor } from './subjects.js';
import type { EventTransport, Subscription } from './types.js';

/**
 * Calls `drop(tenantId)` in this process for every TenantChanged (tenant updated, deactivated, key revoked),
 * on a consumer of the process's own (perInstance): every replica holding a cache of tenants drops its copy
 * at once, the cache's TTL staying the bound when the bus is late or down. `durable` names the consumer.
 */
export function onTenantChanged(
  events: EventTransport,
  opts: { eventsPrefix: string; durable: string; logger: Logger },
  drop: (tenantId: string) => void,
): Promise<Subscription> {
  return events.subscribe({
    durable: opts.durable,
    subjects: [subjectFor(opts.eventsPrefix, 'tenancy.tenant_changed')],
    perInstance: true,
    handler: async (m) => {
      const e = decodeOrSkip(TenantChanged, m, opts.logger);
      if (e?.tenantId) drop(e.tenantId);
    },
  });
}
