import { type ExportedSpan, type OtlpSink, sql, startOtlpSink, startPrivateRedis, waitFor } from "@webhooks/testing";
import { Redis } from "ioredis";
import { describe, expect } from "vitest";
import { workerTest } from "./fixtures.ts";
import { deliveriesOf, publish, subscribe } from "./stack.ts";

// docs/operations.md#tracing: the API's server spans and the attempts' spans, exported over
// OTLP/HTTP to a real receiver on loopback. The SDK's batching processor reads its delay from
// the environment: a short one, so that spans arrive soon after they end.
process.env.OTEL_BSP_SCHEDULE_DELAY = "50";

const it = workerTest.extend("sink", async ({ defer }) => {
  const sink = await startOtlpSink();
  defer(() => sink.close());
  return sink;
});

const SERVER = 2;
const CLIENT = 3;
const ERROR = 2;

/** The exported spans of one name, once there are at least `count` of them. */
async function spansNamed(
  sink: OtlpSink,
  name: string,
  count: number,
  filter: (span: ExportedSpan) => boolean = () => true,
) {
  return waitFor(
    () => {
      const found = sink.spans.filter((span) => span.name === name && filter(span));
      return found.length >= count ? found : undefined;
    },
    { timeoutMs: 60_000, what: `${count} span(s) ${name}` },
  );
}

function otel(sink: OtlpSink, extra: Record<string, string> = {}): Record<string, string> {
  return { OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", ...extra };
}

describe("tracing", () => {
  it("makes a server span per request and puts every attempt, across a retry, in the publish's trace", async ({
    stack,
    receiver,
    sink,
  }) => {
    const { api } = await stack(otel(sink, { SEND_TRACEPARENT: "true", RETRY_SCHEDULE: "200ms" }));
    const rx = await receiver((_, index) => ({ status: index === 0 ? 500 : 200 }));
    const subscription = await subscribe(api, { url: rx.url, events: ["order.created"] });
    const event = await publish(api, { type: "order.created", data: { id: 1 } });
    await waitFor(() => rx.received.length >= 2, { timeoutMs: 60_000, what: "the retry" });
    const [delivery] = await deliveriesOf(api, event.id);

    const [publishSpan] = await spansNamed(sink, "POST /v1/events", 1);
    expect(publishSpan).toMatchObject({
      serviceName: "webhooks-api",
      kind: SERVER,
      parentSpanId: "",
      attributes: {
        "http.request.method": "POST",
        "http.route": "/v1/events",
        "http.response.status_code": 202,
        "webhook.event_id": event.id,
      },
    });
    // Named by the route's template, never by the ids in the path.
    await api.call("GET", `/v1/deliveries/${delivery!.id}`);
    const [readSpan] = await spansNamed(sink, "GET /v1/deliveries/:delivery_id", 1);
    expect(readSpan!.attributes["url.path"]).toBe(`/v1/deliveries/${delivery!.id}`);

    const attempts = (await spansNamed(sink, "webhook.attempt", 2)).sort(
      (a, b) => Number(a.attributes["webhook.attempt"]) - Number(b.attributes["webhook.attempt"]),
    );
    for (const [index, span] of attempts.entries()) {
      expect(span).toMatchObject({
        serviceName: "webhooks-worker",
        kind: CLIENT,
        traceId: publishSpan!.traceId,
        parentSpanId: publishSpan!.spanId,
        attributes: {
          "webhook.delivery_id": delivery!.id,
          "webhook.subscription_id": subscription.id,
          "webhook.event_type": "order.created",
          "webhook.attempt": index + 1,
        },
      });
      // Each attempt's request named the attempt's own span.
      expect(rx.received[index]!.headers.traceparent).toBe(`00-${span.traceId}-${span.spanId}-01`);
    }
    expect(attempts[0]!.attributes["http.response.status_code"]).toBe(500);
    expect(attempts[0]!.status.code).toBe(ERROR);
    expect(attempts[1]!.attributes["http.response.status_code"]).toBe(200);
    expect(attempts[1]!.status.code).not.toBe(ERROR);
  });

  it("keeps the trace across a worker restart and Redis losing its data, without a traceparent header by default", async ({
    database,
    stack,
    receiver,
    inProcessWorker,
    sink,
    defer,
  }) => {
    const redis = await startPrivateRedis();
    defer(() => redis.stop());
    // No response at all the first time: an attempt that fails without a status code.
    const rx = await receiver((_, index) => (index === 0 ? { status: 200, delayMs: 5_000 } : { status: 204 }));
    const started = await stack(otel(sink, { REDIS_URL: redis.url, RETRY_SCHEDULE: "1s", DELIVERY_TIMEOUT: "1s" }));
    const subscription = await subscribe(started.api, { url: rx.url, events: ["order.created"] });
    const event = await publish(started.api, { type: "order.created", data: { id: 2 } });
    const [first] = await spansNamed(sink, "webhook.attempt", 1);
    expect(first!.attributes["http.response.status_code"]).toBeUndefined();
    expect(first!.status).toMatchObject({ code: ERROR, message: expect.stringMatching(/time/i) });

    // The worker stops and Redis forgets every job: only PostgreSQL knows the delivery and its trace.
    await started.worker.close();
    const admin = new Redis(redis.url);
    await admin.flushall();
    admin.disconnect();
    await inProcessWorker(started.env);

    const [publishSpan] = await spansNamed(sink, "POST /v1/events", 1);
    const [second] = await spansNamed(sink, "webhook.attempt", 1, (span) => span.attributes["webhook.attempt"] === 2);
    expect(second).toMatchObject({
      traceId: publishSpan!.traceId,
      parentSpanId: publishSpan!.spanId,
      status: { code: 0 },
      attributes: { "webhook.subscription_id": subscription.id, "http.response.status_code": 204 },
    });
    expect(first!.traceId).toBe(publishSpan!.traceId);
    const [row] = await sql(database.url, "SELECT traceparent FROM events WHERE id = $1", [event.id]);
    expect(row!.traceparent).toBe(`00-${publishSpan!.traceId}-${publishSpan!.spanId}-01`);
    // SEND_TRACEPARENT is off: receivers see no traceparent.
    expect(rx.received.every((webhook) => webhook.headers.traceparent === undefined)).toBe(true);
  });

  it("exports http/protobuf when asked", async ({ stack, receiver, sink }) => {
    const { api } = await stack(otel(sink, { OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf" }));
    const rx = await receiver();
    await subscribe(api, { url: rx.url, events: ["order.created"] });
    await publish(api, { type: "order.created", data: { id: 3 } });
    await waitFor(() => rx.received.length === 1, { what: "the delivery" });
    const exported = () => Buffer.concat(sink.requests.map((request) => request.body));
    await waitFor(() => exported().includes("webhook.attempt") && exported().includes("POST /v1/events"), {
      timeoutMs: 60_000,
      what: "both spans, encoded",
    });
    expect(sink.requests.every((request) => request.path === "/v1/traces")).toBe(true);
    expect(sink.requests.every((request) => request.contentType === "application/x-protobuf")).toBe(true);
    expect(sink.spans).toEqual([]);
  });

  it("starts nothing without an endpoint, and sends no traceparent", async ({ database, stack, receiver, sink }) => {
    // Every other tracing variable is set: without an endpoint they change nothing.
    const { api, worker } = await stack({
      OTEL_SERVICE_NAME: "elsewhere",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_TRACES_SAMPLER: "always_on",
      SEND_TRACEPARENT: "true",
    });
    expect(api.tracing).toBeUndefined();
    expect(worker.tracing).toBeUndefined();
    const rx = await receiver();
    await subscribe(api, { url: rx.url, events: ["order.created"] });
    const event = await publish(api, { type: "order.created", data: { id: 4 } });
    await waitFor(() => rx.received.length === 1, { what: "the delivery" });
    expect(rx.received[0]!.headers.traceparent).toBeUndefined();
    const [row] = await sql(database.url, "SELECT traceparent FROM events WHERE id = $1", [event.id]);
    expect(row!.traceparent).toBeNull();
    expect(sink.requests).toEqual([]);
  });

  it("continues the caller's trace and honours the sampler", async ({ stack, receiver, sink }) => {
    const { api, worker } = await stack(
      otel(sink, { OTEL_TRACES_SAMPLER: "parentbased_always_off", SEND_TRACEPARENT: "true" }),
    );
    const rx = await receiver();
    await subscribe(api, { url: rx.url, events: ["order.created"] });
    // A sampled caller: its trace goes on, through the API and the attempt.
    const caller = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7" };
    const published = await api.call("POST", "/v1/events", {
      json: { type: "order.created", data: { id: 5 } },
      headers: { traceparent: `00-${caller.traceId}-${caller.spanId}-01` },
    });
    expect(published.status).toBe(202);
    // Not sampled, and no caller: parentbased_always_off records nothing.
    await publish(api, { type: "order.created", data: { id: 6 } });
    await waitFor(() => rx.received.length === 2, { what: "both deliveries" });
    const [publishSpan] = await spansNamed(sink, "POST /v1/events", 1);
    expect(publishSpan).toMatchObject({ traceId: caller.traceId, parentSpanId: caller.spanId });
    const [attempt] = await spansNamed(sink, "webhook.attempt", 1);
    expect(attempt).toMatchObject({ traceId: caller.traceId, parentSpanId: publishSpan!.spanId });
    await waitFor(
      async () => {
        const { data } = (await api.call("GET", "/v1/deliveries?limit=100")).body;
        return data.length === 2 && data.every((d: { status: string }) => d.status === "delivered");
      },
      { what: "both attempts recorded" },
    );
    await Promise.all([api.tracing!.flush(), worker.tracing!.flush()]);
    expect(sink.spans.filter((span) => span.name === "webhook.attempt")).toHaveLength(1);
    const unsampled = rx.received.find((webhook) => webhook.json.data.id === 6)!;
    // An unsampled trace is still named downstream, flagged so.
    expect(unsampled.headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
  });
});
