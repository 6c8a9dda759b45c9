import { trace } from '@opentelemetry/api';
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { afterEach, describe, expect, it } from 'vitest';
import { tracingActive, withSpan } from '../../src/ops/tracing';
import { resetTracingGlobals } from '../helpers/spans';

/** The hot paths skip span work while no SDK is registered: tracingActive says whether one is. */
describe('tracingActive', () => {
  // register() also sets the API's context manager and propagator; the files that run after this
  // one in the same process must find none of the three.
  afterEach(() => resetTracingGlobals());

  it('is false with the API alone and true once a provider is registered, then false again', async () => {
    trace.disable();
    expect(tracingActive()).toBe(false);
    const exporter = new InMemorySpanExporter();
    new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).register();
    expect(tracingActive()).toBe(true);
    await withSpan('probe', {}, async () => {});
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(['probe']);
    trace.disable();
    expect(tracingActive()).toBe(false);
  });
});
