import { context, propagation, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { afterAll, beforeAll } from 'vitest';

/**
 * Captures the spans of this test file in memory. The OpenTelemetry API keeps its tracer provider,
 * context manager and propagator in process-wide globals, and test files share their worker
 * process (vitest.config.ts, `isolate: false`): so the SDK is registered only while this file
 * runs, and all three globals are cleared after it, leaving the next file in the same process with
 * the API's no-op defaults, as a process that never exports spans has them.
 */
export function useInMemorySpans(): InMemorySpanExporter {
  const exporter = new InMemorySpanExporter();
  let provider: NodeTracerProvider | undefined;
  beforeAll(() => {
    provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    provider.register();
  });
  afterAll(async () => {
    await provider?.shutdown();
    resetTracingGlobals();
  });
  return exporter;
}

/** Unregisters the API's tracer provider, context manager and propagator. */
export function resetTracingGlobals(): void {
  trace.disable();
  context.disable();
  propagation.disable();
}
