import { type AddressInfo, connect } from "node:net";
import { createLogger, SERVER_TIMEOUTS } from "@webhooks/core";
import { parseRawResponse, rawExchange } from "@webhooks/testing";
import { Gauge, Registry } from "prom-client";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createOpsServer } from "../src/ops-server.ts";

/** The worker's /metrics and /healthz: no database or queue needed, only a registry. */
const registry = new Registry();
new Gauge({ name: "ops_test_up", help: "Always 1.", registers: [registry] }).set(1);
let failing = false;
new Gauge({
  name: "ops_test_flaky",
  help: "Fails to collect when the test says so.",
  registers: [registry],
  collect() {
    if (failing) throw new Error("collect failed");
    this.set(0);
  },
});
const logLines: Record<string, unknown>[] = [];
const server = createOpsServer(
  registry,
  createLogger({
    level: "info",
    name: "worker",
    destination: { write: (line: string) => void logLines.push(JSON.parse(line)) },
  }),
);
let baseUrl = "";

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

async function call(method: string, path: string) {
  const response = await request(`${baseUrl}${path}`, { method: method as "GET" });
  const text = await response.body.text();
  const headers = response.headers as Record<string, string>;
  return {
    status: response.statusCode,
    headers,
    text,
    json: () => JSON.parse(text) as { error: Record<string, unknown> },
  };
}

function expectContractError(response: Awaited<ReturnType<typeof call>>, status: number, type: string, code: string) {
  expect(response.status).toBe(status);
  expect(response.headers["content-type"]).toBe("application/json");
  expect(response.headers["request-id"]).toMatch(/^req_/);
  expect(response.json().error).toEqual({
    type,
    code,
    message: expect.any(String),
    request_id: response.headers["request-id"],
  });
}

describe("the worker's ops server", () => {
  test("serves /metrics and /healthz to GET and HEAD, with or without a query string", async () => {
    for (const path of ["/metrics", "/metrics?x=1", "/metrics?"]) {
      const response = await call("GET", path);
      expect(response.status, path).toBe(200);
      expect(response.text).toContain("ops_test_up 1");
      expect(response.headers["request-id"]).toMatch(/^req_/);
    }
    const head = await call("HEAD", "/metrics");
    expect(head.status).toBe(200);
    expect(head.text).toBe("");
    for (const path of ["/healthz", "/healthz?probe=k8s"])
      expect((await call("GET", path)).text, path).toBe('{"status":"ok"}');
  });

  test("answers another method with 405 and Allow, another path with 404, in the API's error shape", async () => {
    for (const [method, path] of [
      ["POST", "/metrics"],
      ["DELETE", "/healthz"],
      ["PUT", "/metrics?x=1"],
    ] as const) {
      const response = await call(method, path);
      expectContractError(response, 405, "invalid_request_error", "method_not_allowed");
      expect(response.headers.allow).toBe("GET, HEAD");
    }
    for (const path of ["/", "/nothing", "/metrics/", "/metricsx", "/healthz/x"]) {
      expectContractError(await call("GET", path), 404, "invalid_request_error", "resource_missing");
    }
  });

  test("answers a metrics read that fails with a 500 in the API's error shape, and logs it with the request id", async () => {
    failing = true;
    try {
      const response = await call("GET", "/metrics");
      expectContractError(response, 500, "api_error", "internal_error");
      expect(response.text).not.toContain("collect failed");
      expect(logLines).toContainEqual(
        expect.objectContaining({
          level: 50,
          requestId: response.headers["request-id"],
          msg: "could not read the metrics",
        }),
      );
    } finally {
      failing = false;
    }
  });

  test("answers requests it cannot read as the API does: in the error shape, then closes", async () => {
    const port = (server.address() as AddressInfo).port;
    const cases: [string, number][] = [
      ["FOO /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400],
      ["GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\u0001b\r\n\r\n", 400],
      ["CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", 400],
      ["GET /metrics HTTP/1.1\r\n\r\n", 400],
      ["GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: example.com\r\n\r\n", 400],
      ["GET /metrics HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n", 400],
      ["GET  /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400],
      [`GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`, 431],
      ["GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: something-else\r\n\r\n", 417],
    ];
    for (const [request, status] of cases) {
      const response = parseRawResponse(await rawExchange(port, request));
      expect(response.status, request.slice(0, 60)).toBe(status);
      expect(response.headers["content-type"]).toBe("application/json");
      expect(response.headers["request-id"]).toMatch(/^req_/);
      expect(response.body.error).toEqual({
        type: "invalid_request_error",
        code: "invalid_request",
        message: expect.any(String),
        request_id: response.headers["request-id"],
      });
    }
    expect((await call("GET", "/healthz")).status).toBe(200);
  });

  test("answers a head that does not arrive in time with a 408 in the error shape", { timeout: 30_000 }, async () => {
    const port = (server.address() as AddressInfo).port;
    const answer = await new Promise<string>((resolve) => {
      const socket = connect(port, "127.0.0.1", () => socket.write("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
      let received = "";
      socket.on("data", (chunk) => (received += chunk.toString()));
      socket.on("error", () => {});
      socket.on("close", () => resolve(received));
    });
    const response = parseRawResponse(answer);
    expect(response.status).toBe(408);
    expect(response.body.error).toMatchObject({ code: "invalid_request", request_id: response.headers["request-id"] });
  });

  test("has the API's timeouts, so that slow clients cannot tie it up", () => {
    expect(server.headersTimeout).toBe(SERVER_TIMEOUTS.headersTimeoutMs);
    expect(server.requestTimeout).toBe(SERVER_TIMEOUTS.requestTimeoutMs);
    expect(server.keepAliveTimeout).toBe(SERVER_TIMEOUTS.keepAliveTimeoutMs);
  });
});
