/**
 * Tracing preload for standalone processes: starts OpenTelemetry before the service's modules load so
 * auto-instrumentation (http, grpc-js, undici, fastify) can patch them. No-op unless
 * OTEL_EXPORTER_OTLP_ENDPOINT is set.
 *
 *   node --import tsx --import ./libs/platform/src/telemetry-preload.ts services/<name>/src/main.ts
 */
import { preloadTelemetry } from './telemetry.js';

await preloadTelemetry();
