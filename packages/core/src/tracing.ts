import type { Context, Span, Tracer } from "@opentelemetry/api";

/** OTEL_TRACES_SAMPLER's values, as OpenTelemetry names them (docs/operations.md#tracing). */
export const TRACE_SAMPLERS = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
] as const;

export type TraceSampler = (typeof TRACE_SAMPLERS)[number];

/** Where and how traces are exported, from the standard OTEL_* variables (see config.ts). */
export interface TracingConfig {
  /** The OTLP/HTTP URL spans are posted to. */
  tracesUrl: string;
  protocol: "http/protobuf" | "http/json";
  /** OTEL_SERVICE_NAME; undefined: the process's own name (webhooks-api, webhooks-worker). */
  serviceName: string | undefined;
  sampler: TraceSampler;
  /** The ratio of the traceidratio samplers. */
  samplerArg: number;
}

/** A started OpenTelemetry SDK: the spans of one process, exported in batches. */
export interface Tracing {
  readonly tracer: Tracer;
  /** The context a new span continues: the trace a W3C `traceparent` names, or a new one. */
  contextOf(traceparent: string | null | undefined): Context;
  /** A span's W3C `traceparent`, to store with what it started or to send on. */
  traceparentOf(span: Span): string | undefined;
  /** Exports the spans ended so far. */
  flush(): Promise<void>;
  /** Exports what is left and stops. */
  shutdown(): Promise<void>;
}

/**
 * Starts the SDK when the configuration names an endpoint. Without one, nothing is loaded or
 * started: callers hold `undefined` and skip every span (docs/operations.md#tracing).
 */
export async function startTracing(
  config: TracingConfig | undefined,
  defaultServiceName: string,
): Promise<Tracing | undefined> {
  if (config === undefined) return undefined;
  const { createTracing } = await import("./tracing-sdk.ts");
  return createTracing(config, defaultServiceName);
}
