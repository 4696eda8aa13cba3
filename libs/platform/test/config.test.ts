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

  test('refuses invalid settings with every problem named', () => {
    expect(() => loadConfig({ PORT: 'abc', LOG_LEVEL: 'loud' })).toThrow(/PORT[\s\S]*LOG_LEVEL/);
    expect(() => loadConfig({ S3_ENDPOINT: 'http://minio:9000' })).toThrow(ConfigError);
    expect(() => loadConfig({ CREDENTIALS_KEY: 'c2hvcnQ=' })).toThrow(/32 bytes/);
    expect(() => loadConfig({ PROVB_MODEL_MAP: '[1,2]' })).toThrow(/JSON object/);
  });
});
