// The API's test entry (`@webhooks/api/testing`): the real app on a real server, for the tests of
// every package that needs an API. It lives here, not in packages/testing, so that the shared test
// helpers know nothing of the apps and no package depends on itself through them.
import type { AddressInfo } from "node:net";
import { createApp } from "./app.ts";
import { connectApiDeps } from "./deps.ts";
import { createApiServer } from "./http/server.ts";
import { createLogger, type Config } from "@webhooks/core";
import type { PrismaClient } from "@webhooks/db";
import type { DeliveryQueue } from "@webhooks/queue";
import { request as httpRequest } from "undici";
import { TEST_API_KEY } from "@webhooks/testing";

export interface ApiResponse<T = any> {
  status: number;
  headers: Record<string, string>;
  body: T;
}

export interface TestApi {
  baseUrl: string;
  config: Config;
  db: PrismaClient;
  queue: DeliveryQueue;
  /** Sends a request over HTTP with the test API key (unless `key` says otherwise). */
  call<T = any>(
    method: string,
    path: string,
    options?: { json?: unknown; body?: string; headers?: Record<string, string>; key?: string | null },
  ): Promise<ApiResponse<T>>;
  close(): Promise<void>;
}

/**
 * The real API app on a real HTTP server on loopback, against the test's database and Redis.
 * `clock` replaces Date.now for the API-key cache, so a test can move time instead of waiting.
 */
export async function startTestApi(config: Config, options: { clock?: () => number } = {}): Promise<TestApi> {
  const deps = await connectApiDeps({ ...config, databasePoolSize: 5 }, createLogger({ level: config.logLevel, name: "api" }), {
    redisReadyTimeoutMs: 1_000,
    ...(options.clock ? { clock: options.clock } : {}),
  });
  const app = createApp(deps);
  // The server main.ts runs, with its timeouts and its answers to requests the adapter refuses.
  const server = createApiServer(app.fetch, deps.logger);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    baseUrl,
    config,
    db: deps.db,
    queue: deps.queue,
    async call(method, path, options = {}) {
      const headers: Record<string, string> = { ...options.headers };
      const key = options.key === undefined ? TEST_API_KEY : options.key;
      if (key !== null) headers.authorization = `Bearer ${key}`;
      let body = options.body;
      if (options.json !== undefined) {
        body = JSON.stringify(options.json);
        headers["content-type"] ??= "application/json";
      }
      const response = await httpRequest(`${baseUrl}${path}`, { method: method as "GET", headers, body });
      const text = await response.body.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // Not JSON (docs page, metrics): keep the text.
      }
      const flat: Record<string, string> = {};
      for (const [name, value] of Object.entries(response.headers)) flat[name] = Array.isArray(value) ? value.join(", ") : String(value);
      return { status: response.statusCode, headers: flat, body: parsed as any };
    },
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      // The queue prefix is this test's own: leave nothing behind in the shared Redis.
      if (deps.redis.status === "ready") await Promise.all(deps.queue.queues.map((queue) => queue.obliterate({ force: true }).catch(() => {})));
      await deps.close();
    },
  };
}
