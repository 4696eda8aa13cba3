import type { Config } from './config.js';

export interface Telemetry {
  stop(): Promise<void>;
}

/**
 * OpenTelemetry bootstrap: inactive unless OTEL_EXPORTER_OTLP_ENDPOINT is set. Loaded lazily so a
 * process without tracing pays nothing for the SDK.
 */
export async function startTelemetry(config: Pick<Config, 'otelEndpoint'>, serviceName: string): Promise<Telemetry> {
  if (!config.otelEndpoint) return { stop: async () => {} };
  const [{ NodeSDK }, { OTLPTraceExporter }, { HttpInstrumentation }, { GrpcInstrumentation }, { UndiciInstrumentation }, { resourceFromAttributes }] =
    await Promise.all([
      import('@opentelemetry/sdk-node'),
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/instrumentation-http'),
      import('@opentelemetry/instrumentation-grpc'),
      import('@opentelemetry/instrumentation-undici'),
      import('@opentelemetry/resources'),
    ]);
  const sdk = new NodeSDK({
    resource: resourceFromAttributes({ 'service.name': serviceName }),
    traceExporter: new OTLPTraceExporter({ url: `${config.otelEndpoint.replace(/\/+$/, '')}/v1/traces` }),
    instrumentations: [new HttpInstrumentation(), new GrpcInstrumentation(), new UndiciInstrumentation()],
  });
  sdk.start();
  return { stop: () => sdk.shutdown() };
}
