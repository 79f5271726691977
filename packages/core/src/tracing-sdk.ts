import { defaultTextMapGetter, defaultTextMapSetter, ROOT_CONTEXT, type Span, trace } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter as JsonTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtobufTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler,
} from "@opentelemetry/sdk-trace-base";
import { ATTR_SERVICE_NAME } from "@opentelemetry/semantic-conventions";
import type { Tracing, TracingConfig } from "./tracing.ts";

/** The instrumentation scope of every span the service makes. */
const TRACER_NAME = "webhook-delivery-service";

/**
 * The official SDK, as its environment variables would set it up: an OTLP/HTTP exporter in the
 * configured encoding behind a batching processor (OTEL_BSP_*), the resource from
 * OTEL_RESOURCE_ATTRIBUTES and the service name, the configured sampler. The exporter reads
 * OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT and _COMPRESSION itself. Nothing is registered globally:
 * the spans are the service's own, made explicitly where they happen.
 */
export function createTracing(config: TracingConfig, defaultServiceName: string): Tracing {
  const exporter =
    config.protocol === "http/json"
      ? new JsonTraceExporter({ url: config.tracesUrl })
      : new ProtobufTraceExporter({ url: config.tracesUrl });
  const fromEnv = detectResources({ detectors: [envDetector] });
  const serviceName = config.serviceName ?? (fromEnv.attributes[ATTR_SERVICE_NAME] ? undefined : defaultServiceName);
  const resource = defaultResource()
    .merge(fromEnv)
    .merge(resourceFromAttributes(serviceName === undefined ? {} : { [ATTR_SERVICE_NAME]: serviceName }));
  const provider = new BasicTracerProvider({
    resource,
    sampler: samplerOf(config),
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  const propagator = new W3CTraceContextPropagator();

  return {
    tracer: provider.getTracer(TRACER_NAME),
    contextOf(traceparent) {
      if (!traceparent) return ROOT_CONTEXT;
      return propagator.extract(ROOT_CONTEXT, { traceparent }, defaultTextMapGetter);
    },
    traceparentOf(span: Span) {
      const carrier: Record<string, string> = {};
      propagator.inject(trace.setSpan(ROOT_CONTEXT, span), carrier, defaultTextMapSetter);
      return carrier.traceparent;
    },
    flush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  };
}

function samplerOf(config: TracingConfig): Sampler {
  const ratio = new TraceIdRatioBasedSampler(config.samplerArg);
  switch (config.sampler) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return ratio;
    case "parentbased_always_on":
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: ratio });
  }
}
