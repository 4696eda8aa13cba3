import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/wait.js';
import {
  batchSpanProcessorConfig,
  createInMemorySpanExporter,
  type InMemorySpanExporter,
  otlpTracesUrl,
  resourceAttributes,
  startTelemetry,
  type Telemetry,
  withSpan,
} from '../src/telemetry.js';

/** The product's version (the root package.json's: buildInfo()), not the platform package's. */
const productVersion = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')).version as string;

describe('telemetry SDK setup', () => {
  let exporter: InMemorySpanExporter;
  let telemetry: Telemetry;
  const saved = { ...process.env };

  beforeAll(async () => {
    delete process.env.OTEL_SERVICE_NAME;
    delete process.env.SERVICE_VERSION;
    process.env.OTEL_RESOURCE_ATTRIBUTES = 'deployment.environment.name=test-env';
    exporter = await createInMemorySpanExporter();
    telemetry = await startTelemetry({}, 'imagegen-unit', { spanExporter: exporter, instrumentations: false });
  });
  afterAll(async () => {
    await telemetry.stop();
    process.env = saved;
  });

  it('spans carry service.name/namespace/version/instance.id, the SDK attributes and OTEL_RESOURCE_ATTRIBUTES', async () => {
    await withSpan('unit', {}, async () => {});
    await telemetry.flush();
    await waitFor(() => exporter.getFinishedSpans().length === 1, { message: 'the one span exported' });
    const attrs = exporter.getFinishedSpans()[0].resource.attributes;
    expect(attrs).toMatchObject({
      'service.name': 'imagegen-unit',
      'service.namespace': 'imagegen',
      'service.version': productVersion,
      'telemetry.sdk.language': 'nodejs',
      'telemetry.sdk.name': 'opentelemetry',
      'deployment.environment.name': 'test-env',
    });
    expect(attrs['service.instance.id']).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('telemetry configuration from standard OTEL_* variables', () => {
  it('service.name/version overrides', () => {
    const a = resourceAttributes('imagegen-x', { OTEL_SERVICE_NAME: 'custom', SERVICE_VERSION: '1.2.3' });
    expect(a).toMatchObject({ 'service.name': 'custom', 'service.version': '1.2.3', 'service.namespace': 'imagegen' });
    expect(resourceAttributes('imagegen-x', {})['service.version']).toBe(productVersion);
  });

  it('OTLP traces URL: base endpoint + /v1/traces, or the per-signal endpoint as is', () => {
    expect(otlpTracesUrl('http://collector:4318/', {})).toBe('http://collector:4318/v1/traces');
    expect(otlpTracesUrl('http://collector:4318', { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://x.example/otlp/traces' })).toBe(
      'https://x.example/otlp/traces',
    );
  });

  it('batch span processor: OTEL_BSP_* honoured, imagegen defaults otherwise, junk ignored', () => {
    expect(batchSpanProcessorConfig({})).toEqual({ scheduledDelayMillis: 2000, maxQueueSize: 4096 });
    expect(
      batchSpanProcessorConfig({
        OTEL_BSP_SCHEDULE_DELAY: '500',
        OTEL_BSP_MAX_QUEUE_SIZE: '10000',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '256',
        OTEL_BSP_EXPORT_TIMEOUT: '10000',
      }),
    ).toEqual({ scheduledDelayMillis: 500, maxQueueSize: 10000, maxExportBatchSize: 256, exportTimeoutMillis: 10000 });
    expect(batchSpanProcessorConfig({ OTEL_BSP_SCHEDULE_DELAY: 'soon', OTEL_BSP_MAX_QUEUE_SIZE: '' })).toEqual({
      scheduledDelayMillis: 2000,
      maxQueueSize: 4096,
    });
  });
});
