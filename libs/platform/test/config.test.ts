import { describe, expect, test } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';

describe('loadConfig', () => {
  test('defaults of the all-in-one shape', () => {
    const c = loadConfig({});
    expect(c.port).toBe(8080);
    expect(c.publicBaseUrl).toBe('http://localhost:8080');
    expect(c.dataDir).toBe('./data');
    expect(c.target).toBe('all');
    expect(c.databaseUrl).toBeUndefined();
    expect(c.natsUrl).toBeUndefined();
    expect(c.s3).toBeUndefined();
    expect(c.eventsPrefix).toBe('imagegen');
  });

  test('reads every swapped default', () => {
    const c = loadConfig({
      PORT: '9000',
      PUBLIC_BASE_URL: 'https://img.example.com/',
      DATABASE_URL: 'postgres://u@db:5432/x',
      NATS_URL: 'nats://nats:4222',
      S3_ENDPOINT: 'http://minio:9000',
      S3_ACCESS_KEY: 'a',
      S3_SECRET_KEY: 'b',
      TENANCY_ADDR: 'tenancy:50051',
      PROVA_MODEL_MAP: '{"provA-pro-image":"upstream-pro"}',
    });
    expect(c.port).toBe(9000);
    expect(c.publicBaseUrl).toBe('https://img.example.com');
    expect(c.s3).toMatchObject({ endPoint: 'http://minio:9000', bucket: 'imagegen' });
    expect(c.addresses.tenancy).toBe('tenancy:50051');
    expect(c.provAModelMap).toEqual({ 'provA-pro-image': 'upstream-pro' });
  });

  test('OUTBOX_MAX_ATTEMPTS: default 10, a whole number >= 1', () => {
    expect(loadConfig({}).outboxMaxAttempts).toBe(10);
    expect(loadConfig({ OUTBOX_MAX_ATTEMPTS: '3' }).outboxMaxAttempts).toBe(3);
    expect(() => loadConfig({ OUTBOX_MAX_ATTEMPTS: '0' })).toThrow(ConfigError);
    expect(() => loadConfig({ OUTBOX_MAX_ATTEMPTS: 'many' })).toThrow(ConfigError);
  });

  test('service tunables: defaults', () => {
    const c = loadConfig({});
    expect(c.rateLimits).toEqual({
      disabled: false,
      defaultPerMinute: 60,
      generationsPerMinute: 30,
      uploadsPerMinute: 20,
      oauthTokenPerMinute: 30,
      adminPerMinute: 300,
      adminLoginPerMinute: 10,
      prefix: undefined,
    });
    expect(c.webhooks).toEqual({
      timeoutMs: 10_000,
      pollMs: undefined,
      retryBaseMs: undefined,
      retryMaxMs: undefined,
      maxAttempts: undefined,
    });
    expect(c.generation).toEqual({
      breakerFailureThreshold: 5,
      breakerResetTimeoutMs: 30_000,
      provATimeoutMs: 120_000,
      provBTimeoutMs: 240_000,
      uploadTimeoutMs: 30_000,
      jobsRunningPerTenant: 4,
      jobsQueuedPerTenant: 1000,
      jobWorkers: 8,
      jobPollMs: 500,
    });
    expect(c.usage).toEqual({ tenantCacheMs: 5000, consumerConcurrency: 64, consumerParallelBatches: 2, batchLingerMs: 10 });
    expect(c.grpcDeadlineMs).toBe(30_000);
    expect(c.opsPort).toBeUndefined();
    expect(c.shutdownDrainMs).toBe(0);
    expect(c.logRequests).toBe(false);
  });

  test('service tunables: read from the environment (empty means unset)', () => {
    const c = loadConfig({
      RATE_LIMIT_DISABLED: '1',
      RATE_LIMIT_DEFAULT_PER_MINUTE: '100',
      RATE_LIMIT_GENERATIONS_PER_MINUTE: '7',
      RATE_LIMIT_UPLOADS_PER_MINUTE: '8',
      RATE_LIMIT_OAUTH_TOKEN_PER_MINUTE: '9',
      RATE_LIMIT_ADMIN_PER_MINUTE: '',
      RATE_LIMIT_ADMIN_LOGIN_PER_MINUTE: '11',
      RATE_LIMIT_PREFIX: 'rl',
      WEBHOOK_TIMEOUT_MS: '3000',
      WEBHOOK_POLL_MS: '10',
      WEBHOOK_RETRY_BASE_MS: '20',
      WEBHOOK_RETRY_MAX_MS: '1000',
      WEBHOOK_MAX_ATTEMPTS: '3',
      PROVIDER_BREAKER_THRESHOLD: '3',
      PROVIDER_BREAKER_RESET_MS: '800',
      PROVA_TIMEOUT_MS: '1000',
      PROVB_TIMEOUT_MS: '2000',
      UPLOAD_FETCH_TIMEOUT_MS: '500',
      JOBS_RUNNING_PER_TENANT: '2',
      JOBS_QUEUED_PER_TENANT: '50',
      JOB_WORKERS: '3',
      JOB_POLL_MS: '100',
      USAGE_TENANT_CACHE_MS: '500',
      USAGE_CONSUMER_CONCURRENCY: '4',
      USAGE_CONSUMER_PARALLEL_BATCHES: '1',
      USAGE_BATCH_LINGER_MS: '0',
      GRPC_DEADLINE_MS: '5000',
      OPS_PORT: ' 9464 ',
      SHUTDOWN_DRAIN_MS: '2000',
      LOG_REQUESTS: '1',
    });
    expect(c.rateLimits).toEqual({
      disabled: true,
      defaultPerMinute: 100,
      generationsPerMinute: 7,
      uploadsPerMinute: 8,
      oauthTokenPerMinute: 9,
      adminPerMinute: 300,
      adminLoginPerMinute: 11,
      prefix: 'rl',
    });
    expect(c.webhooks).toEqual({ timeoutMs: 3000, pollMs: 10, retryBaseMs: 20, retryMaxMs: 1000, maxAttempts: 3 });
    expect(c.generation).toEqual({
      breakerFailureThreshold: 3,
      breakerResetTimeoutMs: 800,
      provATimeoutMs: 1000,
      provBTimeoutMs: 2000,
      uploadTimeoutMs: 500,
      jobsRunningPerTenant: 2,
      jobsQueuedPerTenant: 50,
      jobWorkers: 3,
      jobPollMs: 100,
    });
    expect(c.usage).toEqual({ tenantCacheMs: 500, consumerConcurrency: 4, consumerParallelBatches: 1, batchLingerMs: 0 });
    expect(c).toMatchObject({ grpcDeadlineMs: 5000, opsPort: 9464, shutdownDrainMs: 2000, logRequests: true });
  });

  test('service tunables: invalid values are refused by name', () => {
    const bad = {
      RATE_LIMIT_ADMIN_PER_MINUTE: '-1',
      RATE_LIMIT_DISABLED: 'maybe',
      WEBHOOK_RETRY_BASE_MS: 'soon',
      PROVA_TIMEOUT_MS: '0',
      OPS_PORT: '70000',
      GRPC_DEADLINE_MS: '0',
    };
    let message = '';
    try {
      loadConfig(bad);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      message = (err as Error).message;
    }
    for (const name of Object.keys(bad)) expect(message).toContain(name);
  });

  test('refuses invalid settings with every problem named', () => {
    expect(() => loadConfig({ PORT: 'abc', LOG_LEVEL: 'loud' })).toThrow(/PORT[\s\S]*LOG_LEVEL/);
    expect(() => loadConfig({ S3_ENDPOINT: 'http://minio:9000' })).toThrow(ConfigError);
    expect(() => loadConfig({ CREDENTIALS_KEY: 'c2hvcnQ=' })).toThrow(/32 bytes/);
    expect(() => loadConfig({ PROVB_MODEL_MAP: '[1,2]' })).toThrow(/JSON object/);
  });
});
