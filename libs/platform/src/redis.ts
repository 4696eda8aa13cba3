import { Redis } from 'ioredis';

/**
 * A Redis connection for a shared counter or record (rate limits, concurrency slots, idempotency): fails fast
 * (2 s to connect, 1 s a command, one retry) so that a Redis outage costs a request milliseconds, not seconds;
 * each caller decides what it does meanwhile. `name` shows in CLIENT LIST (`imagegen-<name>`).
 */
export function redisClient(url: string, name: string): Redis {
  return new Redis(url, { connectTimeout: 2000, commandTimeout: 1000, maxRetriesPerRequest: 1, connectionName: `imagegen-${name}` });
}
