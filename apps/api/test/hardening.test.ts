import { type AddressInfo, connect, createServer, type Socket } from "node:net";
import { connectApiDeps, createApiServer, createApp } from "@webhooks/api";
import { publish, startTestApi, subscribe, type TestApi } from "@webhooks/api/testing";
import { newId, SERVER_TIMEOUTS } from "@webhooks/core";
import {
  parseRawResponse,
  parseRawResponses,
  rawExchange,
  startTcpProxy,
  TEST_API_KEY,
  testConfig,
} from "@webhooks/testing";
import { pino } from "pino";
import { describe, expect } from "vitest";
import { deliveryListSchema, deliverySchema } from "../src/deliveries/schemas.ts";
import { eventSchema } from "../src/events/schemas.ts";
import { apiTest } from "./fixtures.ts";

/** What the hostile-input probe left over: answers a client can trust, and limits on abuse. */
const test = apiTest();

function expectErrorShape(response: { body: { error: Record<string, unknown> }; headers: Record<string, string> }) {
  expect(response.body.error).toMatchObject({
    type: expect.any(String),
    code: expect.any(String),
    message: expect.any(String),
  });
  expect(response.body.error.request_id).toMatch(/^req_/);
  expect(response.body.error.request_id).toBe(response.headers["request-id"]);
}

const port = (baseUrl: string) => Number(new URL(baseUrl).port);

function withPort(url: string, newPort: number): string {
  const parsed = new URL(url);
  parsed.port = String(newPort);
  return parsed.toString();
}

async function createDelivery(api: TestApi): Promise<string> {
  const type = `hardening.${Math.random().toString(36).slice(2, 8)}`;
  await subscribe(api, { url: "https://example.com/in", events: [type] });
  await publish(api, { type, data: {} });
  const list = await api.get(`/v1/deliveries?event=${type}`, 200, { schema: deliveryListSchema });
  expect(list.body.data).toHaveLength(1);
  return list.body.data[0]!.id;
}

describe("unknown, missing and repeated parameters", () => {
  test("refuses unknown body parameters on retry, naming them; accepts no body and {}", async ({ api, database }) => {
    const id = await createDelivery(api);
    const unknown = await api.post(`/v1/deliveries/${id}/retry`, { force: true }, 400);
    expect(unknown.body.error).toMatchObject({
      type: "invalid_request_error",
      code: "parameter_unknown",
      param: "force",
    });
    expect(unknown.body.error.message).toContain("force");
    expectErrorShape(unknown);

    await api.post(`/v1/deliveries/${id}/retry`, undefined, 202, { schema: deliverySchema });
    await api.post(`/v1/deliveries/${id}/retry`, {}, 202, { schema: deliverySchema });
    // An empty body is no body, whatever its type: fetch(url, { method: "POST", body: "" }) sends text/plain.
    for (const type of ["text/plain;charset=UTF-8", "application/json", "application/x-www-form-urlencoded"]) {
      const response = await api.call("POST", `/v1/deliveries/${id}/retry`, {
        body: "",
        headers: { "content-type": type },
      });
      expect(response.status, type).toBe(202);
    }
    // Where a body is required, its fields are named as missing, as with no body at all.
    const publish = await api.call("POST", "/v1/events", {
      body: "",
      headers: { "content-type": "text/plain;charset=UTF-8" },
    });
    expect(publish.status).toBe(400);
    expect(publish.body.error).toMatchObject({ code: "parameter_missing", param: "type" });
  });

  test("answers 400 to PUT /v1/subscriptions/{id} without a body; {} is still a no-op update", async ({
    api,
    database,
  }) => {
    const created = await api.call("POST", "/v1/subscriptions", {
      json: { url: "https://example.com/put", events: ["a.b"] },
    });
    const path = `/v1/subscriptions/${created.body.id}`;
    for (const headers of [{}, { "content-type": "application/json" }] as Record<string, string>[]) {
      const response = await api.call("PUT", path, { headers });
      expect(response.status).toBe(400);
      expect(response.body.error).toMatchObject({ type: "invalid_request_error", code: "body_missing" });
      expectErrorShape(response);
    }
    expect((await api.call("PUT", path, { json: {} })).status).toBe(200);
    // Where no route takes PUT, the answer is still the 405.
    await api.put("/v1/events", undefined, 405);
  });

  test("refuses a query parameter on every route that takes none, naming it", async ({ api, database }) => {
    const delivery = await createDelivery(api);
    const { subscription_id: subscription, event_id: event } = (
      await api.get(`/v1/deliveries/${delivery}`, 200, { schema: deliverySchema })
    ).body;
    const ids: Record<string, string> = { delivery_id: delivery, subscription_id: subscription, event_id: event };
    const document = (await api.call("GET", "/openapi.json", { key: null })).body as {
      paths: Record<string, Record<string, { parameters?: { in: string }[] }>>;
    };
    let checked = 0;
    for (const [template, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        if ((operation.parameters ?? []).some((parameter) => parameter.in === "query")) continue;
        const path = template.replace(/\{(\w+)\}/g, (_, name: string) => ids[name] ?? "unknown");
        const response = await api.call(
          method.toUpperCase(),
          `${path}?bogus=1`,
          method === "get" || method === "delete" ? {} : { json: {} },
        );
        expect(response.status, `${method} ${path}`).toBe(400);
        expect(response.body.error, `${method} ${path}`).toMatchObject({
          type: "invalid_request_error",
          code: "parameter_unknown",
          param: "bogus",
        });
        expectErrorShape(response);
        checked++;
      }
    }
    // Every route but the three lists, which refuse unknown parameters through their own schemas.
    expect(checked).toBeGreaterThanOrEqual(12);
    // Nothing was changed by the refused requests: the subscription is still there and active.
    expect((await api.call("GET", `/v1/subscriptions/${subscription}`)).body).toMatchObject({ active: true });
  });

  test("says a query parameter must be given once, for every query parameter", async ({ api, database }) => {
    const id = await createDelivery(api);
    const cases: [string, string][] = [
      ["/v1/deliveries?limit=5&limit=6", "limit"],
      ["/v1/deliveries?status=queued&status=failed", "status"],
      ["/v1/deliveries?since=2026-01-01T00:00:00Z&since=2026-01-02T00:00:00Z", "since"],
      ["/v1/subscriptions?starting_after=a&starting_after=b", "starting_after"],
      [`/v1/deliveries/${id}/attempts?limit=1&limit=1`, "limit"],
    ];
    for (const [path, param] of cases) {
      const response = await api.call("GET", path);
      expect(response.status, path).toBe(400);
      expect(response.body.error, path).toMatchObject({
        code: "parameter_invalid",
        param,
        message: `${param} must be given once`,
      });
      expectErrorShape(response);
    }
  });
});

describe("client aborts and an unreachable database", () => {
  test("counts a client that closes mid-body as 499 and logs it below error", async ({ api, database }) => {
    const lines: string[] = [];
    const logger = pino({ level: "debug" }, { write: (line: string) => void lines.push(line) });
    const deps = await connectApiDeps({ ...testConfig(database.url), databasePoolSize: 2 }, logger, {
      redisReadyTimeoutMs: 1_000,
    });
    const server = createApiServer(createApp(deps).fetch, logger);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      await new Promise<void>((resolve) => {
        const socket = connect(port(baseUrl), "127.0.0.1", () => {
          socket.write(
            `POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TEST_API_KEY}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"type":"`,
            () => setTimeout(() => socket.destroy(), 100),
          );
        });
        socket.on("close", () => resolve());
      });
      // The request finishes on the server a moment after the socket closes.
      let metrics = "";
      for (let i = 0; i < 50 && !metrics.includes('status="499"'); i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        metrics = await (await fetch(`${baseUrl}/metrics`)).text();
      }
      // Refused in the body reader, before routing: the route label is the middleware's.
      expect(metrics).toMatch(
        /webhook_api_request_duration_seconds_count\{method="POST",route="[^"]+",status="499"\} 1/,
      );
      expect(metrics).not.toContain('status="500"');
      const entries = lines.map((line) => JSON.parse(line) as { level: number; msg: string; status?: number });
      expect(entries.filter((entry) => entry.level >= 50)).toEqual([]);
      expect(entries.find((entry) => entry.msg === "request" && entry.status === 499)).toBeDefined();
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await deps.close();
    }
  });

  test("answers 503 with Retry-After on every route while PostgreSQL is unreachable", async ({ api, database }) => {
    // A port with nothing listening: the database is down from the start.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const deadPort = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const down = await startTestApi(testConfig(withPort(database.url, deadPort)));
    try {
      const requests: [string, string, unknown][] = [
        ["POST", "/v1/events", { type: "down.test", data: { a: 1 } }],
        ["GET", `/v1/events/${newId("event")}`, undefined],
        ["GET", "/v1/subscriptions", undefined],
        ["POST", "/v1/subscriptions", { url: "https://example.com/x", events: ["*"] }],
        ["GET", "/v1/deliveries", undefined],
        ["POST", `/v1/deliveries/${newId("delivery")}/retry`, undefined],
      ];
      for (const [method, path, json] of requests) {
        const response = await down.call(method, path, json === undefined ? {} : { json });
        expect(response.status, `${method} ${path}`).toBe(503);
        expect(response.body.error).toMatchObject({ type: "api_error", code: "service_unavailable" });
        expect(Number(response.headers["retry-after"])).toBeGreaterThanOrEqual(1);
        expectErrorShape(response);
      }
      // The readiness probe says so, without the driver's message (it named the host and port).
      const ready = await down.call("GET", "/readyz", { key: null });
      expect(ready.status).toBe(503);
      expect(ready.body).toEqual({
        status: "unavailable",
        checks: { postgres: { ok: false, error: "unreachable" }, redis: { ok: true } },
      });
    } finally {
      await down.close();
    }
  });

  test("answers 503 when PostgreSQL goes away mid-burst, and never drops the connection", async ({ api, database }) => {
    const target = new URL(database.url);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const viaProxy = await startTestApi(testConfig(withPort(database.url, proxy.port)));
    try {
      const publish = (i: number) => viaProxy.call("POST", "/v1/events", { json: { type: "burst.test", data: { i } } });
      expect((await Promise.all(Array.from({ length: 10 }, (_, i) => publish(i)))).map((r) => r.status)).toEqual(
        Array(10).fill(202),
      );
      const burst = Array.from({ length: 30 }, (_, i) => publish(i));
      await proxy.refuse();
      const statuses = (await Promise.all(burst)).map((response) => response.status);
      // Those written before the cut are accepted; every other one gets an answer, and it is a 503.
      expect(
        statuses.every((status) => status === 202 || status === 503),
        statuses.join(","),
      ).toBe(true);
      const after = await publish(99);
      expect(after.status).toBe(503);
      expect(after.body.error).toMatchObject({ type: "api_error", code: "service_unavailable" });
      expect(after.headers["retry-after"]).toBeDefined();
      await viaProxy.get("/v1/deliveries", 503);
    } finally {
      await viaProxy.close();
      await proxy.close();
    }
  });
});

describe("requests the HTTP adapter refuses, and slow clients", () => {
  test("answers them in the error shape, with a request-id", async ({ api, database }) => {
    const requests = [
      "GET /v1\\deliveries HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
      "GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n",
      "GET /healthz HTTP/1.1\r\nHost: bad/host\r\nConnection: close\r\n\r\n",
      "OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    ];
    for (const request of requests) {
      const response = parseRawResponse(await rawExchange(port(api.baseUrl), request));
      expect(response.status, request).toBe(400);
      expect(response.headers["content-type"]).toContain("application/json");
      expect(response.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_request" });
      expectErrorShape(response);
    }
  });

  test("refuses heads HTTP/1.1 forbids that Node's parser lets through: Host, version, request line", async ({
    api,
  }) => {
    const requests = [
      "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: example.com\r\n\r\n",
      "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nhost: 127.0.0.1\r\n\r\n",
      "GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\nHost: example.com\r\n\r\n",
      "GET /healthz HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n",
      "GET /healthz HTTP/0.9\r\nHost: 127.0.0.1\r\n\r\n",
      "GET  /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
      "GET /healthz  HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    ];
    for (const request of requests) {
      const response = parseRawResponse(await rawExchange(port(api.baseUrl), request));
      expect(response.status, request).toBe(400);
      expect(response.headers["content-type"]).toContain("application/json");
      expect(response.headers.connection).toBe("close");
      expect(response.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_request" });
      expectErrorShape(response);
    }
    // Well-formed heads pass, HTTP/1.0 and a keep-alive connection's second request included.
    const ok = [
      "GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n",
      "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /healthz?again HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    ];
    for (const request of ok) {
      const statuses = parseRawResponses(await rawExchange(port(api.baseUrl), request)).map((r) => r.status);
      expect(statuses, request).toEqual(request.includes("again") ? [200, 200] : [200]);
    }
    // A second request whose line is malformed is refused, though the first one's line was the
    // same text well-formed, and the connection still holds it.
    const second = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET  /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    const statuses = parseRawResponses(await rawExchange(port(api.baseUrl), second)).map((r) => r.status);
    expect(statuses).toEqual([200, 400]);
    // A head that arrives in pieces, its request line split across them, passes too.
    const pieces = ["GET /hea", "lthz HTT", "P/1.1\r\nHost: 127.0.0.1\r\n", "Connection: close\r\n\r\n"];
    const socket = connect(port(api.baseUrl), "127.0.0.1");
    let received = "";
    socket.on("data", (chunk) => (received += chunk.toString()));
    const closed = new Promise((resolve) => socket.on("close", resolve));
    for (const piece of pieces) {
      socket.write(piece);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await closed;
    expect(parseRawResponses(received).map((r) => r.status)).toEqual([200]);
  });

  test("answers what Node's HTTP parser refuses in the error shape too, and then closes", async ({ api, database }) => {
    const cases: [string, number][] = [
      ["FOO /v1/deliveries HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400],
      ["GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\u0001b\r\n\r\n", 400],
      ["GET /v1/deliveries/dlv_\u00e9 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400],
      ["POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400],
      ["POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400],
      ["CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", 400],
      [`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`, 431],
      ["POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: something-else\r\nContent-Length: 2\r\n\r\n", 417],
    ];
    for (const [request, status] of cases) {
      const raw = await rawExchange(port(api.baseUrl), request);
      const response = parseRawResponse(raw);
      expect(response.status, request.slice(0, 60)).toBe(status);
      expect(response.headers["content-type"]).toContain("application/json");
      expect(response.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_request" });
      expectErrorShape(response);
    }
    // The server goes on serving.
    expect((await api.call("GET", "/healthz", { key: null })).status).toBe(200);
  });

  test("answers the requests read whole before bytes the parser refuses, and refuses those after", async ({ api }) => {
    const type = `hardening.trailing.${Math.random().toString(36).slice(2, 8)}`;
    const first = JSON.stringify({ type, data: { n: 1 } });
    const second = JSON.stringify({ type, data: { n: 2 } });
    const head = (length: number) =>
      `POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TEST_API_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
    // What each answer must be, in order: an event (a 202), or an error code.
    const cases: [string, string[]][] = [
      // A publish, then a stray byte: the event is published, and the client is told so first.
      [`${head(first.length)}${first}\u0001`, ["event", "invalid_request"]],
      // Two pipelined publishes, then a stray byte: both answers, in order, then the refusal.
      [`${head(first.length)}${first}${head(second.length)}${second}\u0001`, ["event", "event", "invalid_request"]],
      // A Content-Length one short: the body as counted is not JSON, and that answer comes first.
      [`${head(first.length - 1)}${first}`, ["invalid_json", "invalid_request"]],
    ];
    for (const [request, answers] of cases) {
      const responses = parseRawResponses(await rawExchange(port(api.baseUrl), request));
      expect(
        responses.map((response) => (response.status === 202 ? response.body.object : response.body.error.code)),
        request.slice(-40),
      ).toEqual(answers);
      for (const response of responses) {
        if (response.status === 202) expect(response.body).toMatchObject({ object: "event", type });
        else expectErrorShape(response);
      }
    }
    // Each accepted publish was answered 202: three events, as the client was told.
    expect(await api.db.event.count({ where: { type } })).toBe(3);
  });

  test("closes 200 connections that trickle their headers, and keeps serving others", { timeout: 30_000 }, async ({
    api,
  }) => {
    const started = Date.now();
    const closedAfter: number[] = [];
    const sockets: Socket[] = [];
    let firstAnswer = "";
    const trickle = setInterval(() => {
      for (const socket of sockets) if (!socket.destroyed) socket.write("a");
    }, 500);
    try {
      await Promise.all(
        Array.from(
          { length: 200 },
          () =>
            new Promise<void>((resolve) => {
              const socket = connect(port(api.baseUrl), "127.0.0.1", () => {
                socket.write("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
                resolve();
              });
              socket.on("error", () => {});
              socket.on("close", () => closedAfter.push(Date.now() - started));
              if (sockets.length === 0) socket.on("data", (chunk) => (firstAnswer += chunk.toString()));
              sockets.push(socket);
            }),
        ),
      );
      // The server still answers while they hang on.
      expect((await api.call("GET", "/healthz", { key: null })).status).toBe(200);
      const deadline = SERVER_TIMEOUTS.headersTimeoutMs + SERVER_TIMEOUTS.connectionsCheckingIntervalMs + 3_000;
      while (closedAfter.length < 200 && Date.now() - started < deadline)
        await new Promise((resolve) => setTimeout(resolve, 200));
      expect(closedAfter).toHaveLength(200);
      // Closed by the headers timeout, not earlier, with a 408 in the error shape.
      expect(Math.min(...closedAfter)).toBeGreaterThanOrEqual(SERVER_TIMEOUTS.headersTimeoutMs - 1_000);
      const timedOut = parseRawResponse(firstAnswer);
      expect(timedOut.status).toBe(408);
      expectErrorShape(timedOut);
    } finally {
      clearInterval(trickle);
      for (const socket of sockets) socket.destroy();
    }
  });
});

describe("numbers in event data are kept exactly or refused", () => {
  test("refuses numbers that parsing would change, naming their path", async ({ api, database }) => {
    const cases: [string, string][] = [
      ['{"type":"num.test","data":{"big":1e400}}', "data.big"],
      ['{"type":"num.test","data":{"int":12345678901234567890}}', "data.int"],
      ['{"type":"num.test","data":{"list":[1,{"x":-9007199254740993}]}}', "data.list[1].x"],
      ['{"type":"num.test","data":{"pi":3.14159265358979323846}}', "data.pi"],
      ['{"type":"num.test","data":{"tiny":1e-400}}', "data.tiny"],
    ];
    for (const [body, param] of cases) {
      const response = await api.call("POST", "/v1/events", { body, headers: { "content-type": "application/json" } });
      expect(response.status, body).toBe(400);
      expect(response.body.error).toMatchObject({ type: "invalid_request_error", code: "parameter_invalid", param });
      expect(response.body.error.message).toMatch(new RegExp(`^${param.replace(/[.[\]]/g, "\\$&")} `));
    }
  });

  test("stores and returns every accepted number as sent", async ({ api, database }) => {
    const body =
      '{"type":"num.ok","data":{"max":9007199254740991,"min":-9007199254740991,"tenth":0.1,"small":2.5e-3,"huge":1.7976931348623157e308,"text":"12345678901234567890"}}';
    const response = await api.call("POST", "/v1/events", { body, headers: { "content-type": "application/json" } });
    expect(response.status).toBe(202);
    const stored = await api.get(`/v1/events/${response.body.id}`, 200, { schema: eventSchema });
    expect(stored.body.data).toEqual(JSON.parse(body).data);
  });

  test("does not let two different values pass as the same request", async ({ api, database }) => {
    const headers = { "content-type": "application/json", "idempotency-key": `num-${Date.now()}` };
    const first = await api.call("POST", "/v1/events", {
      body: '{"type":"num.key","data":{"n":12345678901234567890}}',
      headers,
    });
    const second = await api.call("POST", "/v1/events", {
      body: '{"type":"num.key","data":{"n":12345678901234567891}}',
      headers,
    });
    expect([first.status, second.status]).toEqual([400, 400]);
  });
});
