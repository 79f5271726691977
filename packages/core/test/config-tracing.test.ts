import { describe, expect, it } from "vitest";
import { loadConfig } from "../src/config.ts";

// docs/configuration.md#tracing: the standard OTEL_* variables, read once at start-up.
describe("tracing configuration", () => {
  it("is off without an endpoint, whatever else is set", () => {
    expect(loadConfig({}).tracing).toBeUndefined();
    expect(
      loadConfig({ OTEL_SERVICE_NAME: "x", OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_TRACES_SAMPLER: "always_on" })
        .tracing,
    ).toBeUndefined();
    expect(
      loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_SDK_DISABLED: "true" }).tracing,
    ).toBeUndefined();
  });

  it("posts to the general endpoint's /v1/traces, or to the traces endpoint as it is", () => {
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }).tracing).toEqual({
      tracesUrl: "http://collector:4318/v1/traces",
      protocol: "http/protobuf",
      serviceName: undefined,
      sampler: "parentbased_always_on",
      samplerArg: 1,
    });
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "https://c.example/otlp/" }).tracing?.tracesUrl).toBe(
      "https://c.example/otlp/v1/traces",
    );
    expect(
      loadConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://traces:4318/custom",
      }).tracing?.tracesUrl,
    ).toBe("http://traces:4318/custom");
    expect(loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://traces:4318/custom" }).tracing?.tracesUrl).toBe(
      "http://traces:4318/custom",
    );
  });

  it("takes the traces protocol over the general one, the service name and the sampler", () => {
    expect(
      loadConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json",
        OTEL_SERVICE_NAME: "webhooks-eu",
        OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
        OTEL_TRACES_SAMPLER_ARG: "0.25",
      }).tracing,
    ).toMatchObject({
      protocol: "http/json",
      serviceName: "webhooks-eu",
      sampler: "parentbased_traceidratio",
      samplerArg: 0.25,
    });
  });

  it("refuses what it cannot do, naming the variable, without echoing an endpoint", () => {
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toThrow(
      'OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json (got "grpc")',
    );
    expect(() => loadConfig({ OTEL_TRACES_SAMPLER: "sometimes" })).toThrow(
      /OTEL_TRACES_SAMPLER must be one of always_on/,
    );
    expect(() => loadConfig({ OTEL_TRACES_SAMPLER_ARG: "2" })).toThrow(
      /OTEL_TRACES_SAMPLER_ARG must be a number between 0 and 1/,
    );
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318?token=s3cret" })).toThrow(
      /^Invalid configuration: OTEL_EXPORTER_OTLP_ENDPOINT must be a URL starting with http:\/\/ or https:\/\/$/,
    );
    expect(() => loadConfig({ SEND_TRACEPARENT: "yes" })).toThrow(/SEND_TRACEPARENT must be true or false/);
  });

  it("sends no traceparent unless asked", () => {
    expect(loadConfig({}).worker.sendTraceparent).toBe(false);
    expect(loadConfig({ SEND_TRACEPARENT: "true" }).worker.sendTraceparent).toBe(true);
  });
});
