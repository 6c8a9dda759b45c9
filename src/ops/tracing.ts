import {
  type Attributes,
  context,
  INVALID_SPAN_CONTEXT,
  ProxyTracerProvider,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import type { Config } from '../env';
import type { Logger } from '../lib/logger';

/**
 * Spans through the OpenTelemetry API only. Without a registered SDK every call here is a no-op
 * (the API's default), so code can trace unconditionally; `setupTracing` registers the SDK, and
 * with it export over OTLP/HTTP, only when an endpoint is configured.
 */

const tracerName = 'parley';

export function tracer() {
  return trace.getTracer(tracerName);
}

/** What the API's global provider delegates to while no SDK is registered: its no-op provider. */
const noopTracerProvider = new ProxyTracerProvider().getDelegate();

/**
 * Whether spans go anywhere: an SDK's provider is registered (by `setupTracing`, or by a test's
 * in-memory exporter). While none is, every span is a no-op, and code on a hot path (each HTTP
 * request, GraphQL operation and database query) skips building spans and their attributes.
 */
export function tracingActive(): boolean {
  const provider = trace.getTracerProvider();
  return !(provider instanceof ProxyTracerProvider) || provider.getDelegate() !== noopTracerProvider;
}

/**
 * The span handed to `withSpan`'s function while tracing is off: it records nothing, as the API's
 * no-op tracer's spans do, but is made once instead of per call.
 */
const nonRecordingSpan = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/** Runs `fn` in a new active span; records an exception and error status when it throws. */
export async function withSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
  opts: { kind?: SpanKind; root?: boolean } = {},
): Promise<T> {
  // Without an SDK the API would only make a no-op span and run `fn` in an unchanged context.
  if (!tracingActive()) return fn(nonRecordingSpan);
  const parent = opts.root ? ROOT_CONTEXT : context.active();
  return tracer().startActiveSpan(name, { kind: opts.kind ?? SpanKind.INTERNAL, attributes }, parent, async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      failSpan(span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}

export function failSpan(span: Span, err: unknown): void {
  if (err instanceof Error) span.recordException(err);
  span.setStatus({
    code: SpanStatusCode.ERROR,
    message: err instanceof Error ? err.message.slice(0, 200) : String(err),
  });
}

/** A span for something that already happened (a database query seen by a query listener). */
export function recordFinishedSpan(name: string, attributes: Attributes, durationMs: number): void {
  const end = Date.now();
  const span = tracer().startSpan(name, { kind: SpanKind.CLIENT, attributes, startTime: end - durationMs });
  span.end(end);
}

/** The context of an incoming request: its `traceparent` (and baggage) when it sends one. */
export function extractContext(headers: Record<string, string | string[] | undefined>) {
  return propagation.extract(ROOT_CONTEXT, headers);
}

export interface Tracing {
  /** Flushes the spans still buffered and stops exporting. */
  shutdown(): Promise<void>;
}

/** The traces URL of the configuration, or null when spans are not exported. */
export function otlpTracesUrl(
  config: Pick<Config, 'OTEL_EXPORTER_OTLP_ENDPOINT' | 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'>,
) {
  if (config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  if (config.OTEL_EXPORTER_OTLP_ENDPOINT) return `${config.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces`;
  return null;
}

/**
 * Registers the OpenTelemetry SDK for this process (the API's providers are process-wide, so
 * only entry points call this): a batch processor exporting OTLP/HTTP (JSON) to the configured
 * endpoint, W3C trace-context propagation, and async context tracking. Returns null when no
 * endpoint is configured: spans then cost nothing and go nowhere.
 */
export async function setupTracing(
  config: Pick<Config, 'OTEL_EXPORTER_OTLP_ENDPOINT' | 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' | 'OTEL_SERVICE_NAME'>,
  logger: Logger,
): Promise<Tracing | null> {
  const url = otlpTracesUrl(config);
  if (!url) return null;
  // Loaded only here, so a process that does not export spans never loads the SDK.
  const [{ OTLPTraceExporter }, { resourceFromAttributes }, { BatchSpanProcessor, NodeTracerProvider }, semconv] =
    await Promise.all([
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/resources'),
      import('@opentelemetry/sdk-trace-node'),
      import('@opentelemetry/semantic-conventions'),
    ]);
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ [semconv.ATTR_SERVICE_NAME]: config.OTEL_SERVICE_NAME }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url }))],
  });
  provider.register();
  logger.info({ url, service: config.OTEL_SERVICE_NAME }, 'exporting traces over OTLP/HTTP');
  return {
    async shutdown() {
      await provider.shutdown().catch((err: unknown) => logger.warn({ err }, 'could not flush traces'));
    },
  };
}
