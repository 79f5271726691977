// The API's test entry (`@webhooks/api/testing`): the real app on a real server, for the tests of
// every package that needs an API. It lives here, not in packages/testing, so that the shared test
// helpers know nothing of the apps and no package depends on itself through them.
import type { AddressInfo } from "node:net";
import { isDeepStrictEqual } from "node:util";
import { z } from "@hono/zod-openapi";
import { type Config, createLogger, type Tracing } from "@webhooks/core";
import type { PrismaClient } from "@webhooks/db";
import { type DeliveryQueue, deleteKeysOfPrefix } from "@webhooks/queue";
import { TEST_API_KEY } from "@webhooks/testing";
import { request as httpRequest } from "undici";
import { createApp } from "./app.ts";
import { connectApiDeps } from "./deps.ts";
import { type EventResponse, eventSchema, type PublishEventRequest } from "./events/schemas.ts";
import { errorSchema } from "./http/schemas.ts";
import { createApiServer } from "./http/server.ts";
import {
  type CreatedSubscriptionResponse,
  type CreateSubscriptionRequest,
  createdSubscriptionSchema,
} from "./subscriptions/schemas.ts";

export interface ApiResponse<T = any> {
  status: number;
  headers: Record<string, string>;
  body: T;
}

export interface CallOptions {
  json?: unknown;
  body?: string;
  headers?: Record<string, string>;
  /** The bearer credential: the test API key by default, null for none. */
  key?: string | null;
}

/** A typed call: the status the test expects, and the documented schema of that answer's body. */
export type ExpectedCall<S extends z.ZodType> = Omit<CallOptions, "json" | "body"> & { schema?: S };

export interface TestApi {
  baseUrl: string;
  config: Config;
  db: PrismaClient;
  queue: DeliveryQueue;
  /** The API's OpenTelemetry SDK; undefined when tracing is off. */
  tracing: Tracing | undefined;
  /** Sends a request over HTTP with the test API key (unless `key` says otherwise). */
  call<T = any>(method: string, path: string, options?: CallOptions): Promise<ApiResponse<T>>;
  /**
   * Typed calls (Svix's `TestClient::post(path, body, expected_status)`): each fails unless the
   * answer has `status`, and checks the body against `schema`, the route's documented response
   * (the error shape when `schema` is left out), so a response that drifts from the OpenAPI
   * document fails the test that sees it.
   */
  get<S extends z.ZodType = typeof errorSchema>(
    path: string,
    status: number,
    options?: ExpectedCall<S>,
  ): Promise<ApiResponse<z.output<S>>>;
  post<S extends z.ZodType = typeof errorSchema>(
    path: string,
    json: unknown,
    status: number,
    options?: ExpectedCall<S>,
  ): Promise<ApiResponse<z.output<S>>>;
  put<S extends z.ZodType = typeof errorSchema>(
    path: string,
    json: unknown,
    status: number,
    options?: ExpectedCall<S>,
  ): Promise<ApiResponse<z.output<S>>>;
  delete<S extends z.ZodType = typeof errorSchema>(
    path: string,
    status: number,
    options?: ExpectedCall<S>,
  ): Promise<ApiResponse<z.output<S>>>;
  close(): Promise<void>;
}

/**
 * The real API app on a real HTTP server on loopback, against the test's database and Redis.
 * `clock` replaces Date.now for the API-key cache, so a test can move time instead of waiting.
 */
export async function startTestApi(config: Config, options: { clock?: () => number } = {}): Promise<TestApi> {
  const deps = await connectApiDeps(
    { ...config, databasePoolSize: 5 },
    createLogger({ level: config.logLevel, name: "api" }),
    {
      redisReadyTimeoutMs: 1_000,
      ...(options.clock ? { clock: options.clock } : {}),
    },
  );
  const app = createApp(deps);
  // The server main.ts runs, with its timeouts and its answers to requests the adapter refuses.
  const server = createApiServer(app.fetch, deps.logger);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  async function call(method: string, path: string, options: CallOptions = {}): Promise<ApiResponse> {
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
    for (const [name, value] of Object.entries(response.headers))
      flat[name] = Array.isArray(value) ? value.join(", ") : String(value);
    return { status: response.statusCode, headers: flat, body: parsed as any };
  }

  async function expectCall<S extends z.ZodType>(
    method: string,
    path: string,
    json: unknown,
    status: number,
    options: ExpectedCall<S> = {},
  ) {
    const { schema = errorSchema, ...rest } = options;
    const response = await call(method, path, json === undefined ? rest : { ...rest, json });
    return { ...response, body: checkResponse(`${method} ${path}`, response, status, schema) as z.output<S> };
  }

  return {
    baseUrl,
    config,
    db: deps.prisma,
    queue: deps.queue,
    tracing: deps.tracing,
    call,
    get: (path, status, options) => expectCall("GET", path, undefined, status, options),
    post: (path, json, status, options) => expectCall("POST", path, json, status, options),
    put: (path, json, status, options) => expectCall("PUT", path, json, status, options),
    delete: (path, status, options) => expectCall("DELETE", path, undefined, status, options),
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      // The queue prefix is this test's own: leave nothing behind in the shared Redis, neither the
      // queues nor what the workers kept under the same prefix (the gate's lines and slots, the
      // reconciler's watermark).
      if (deps.redis.status === "ready") {
        await Promise.all(deps.queue.queues.map((queue) => queue.obliterate({ force: true }).catch(() => {})));
        await deleteKeysOfPrefix(deps.redis, config.queuePrefix).catch(() => {});
      }
      await deps.close();
    },
  };
}

/**
 * The body of `response` as `schema` reads it, or an error naming what differs: the status, a
 * field the schema describes otherwise, or a field it does not document at all (zod drops
 * those in parsing, so the parsed body must equal the one received).
 */
export function checkResponse<S extends z.ZodType>(
  call: string,
  response: ApiResponse<unknown>,
  status: number,
  schema: S,
): z.output<S> {
  const shown = JSON.stringify(response.body);
  if (response.status !== status)
    throw new Error(`${call}: expected status ${status}, got ${response.status}: ${shown}`);
  const parsed = schema.safeParse(response.body);
  if (!parsed.success)
    throw new Error(
      `${call}: the body does not match its documented schema:\n${z.prettifyError(parsed.error)}\n${shown}`,
    );
  if (!isDeepStrictEqual(parsed.data, response.body)) {
    throw new Error(
      `${call}: the body has fields its documented schema does not describe:\n${shown}\nread as: ${JSON.stringify(parsed.data)}`,
    );
  }
  return parsed.data;
}

/**
 * Creates a subscription (201, checked against its schema): the one helper of the api and worker
 * tests. `url` and `events` default to an example endpoint and every event.
 */
export async function subscribe(
  api: TestApi,
  body: Partial<CreateSubscriptionRequest> = {},
  options: { key?: string | null } = {},
): Promise<CreatedSubscriptionResponse & { secret: string }> {
  const created = await subscribeWithScheme(api, body, options);
  if (created.secret === undefined)
    throw new Error("subscribe() makes hmac-sha256 subscriptions; use subscribeWithScheme");
  return { ...created, secret: created.secret };
}

/** Creates a subscription of any signature scheme (201, checked against its schema). */
export async function subscribeWithScheme(
  api: TestApi,
  body: Partial<CreateSubscriptionRequest> = {},
  options: { key?: string | null } = {},
): Promise<CreatedSubscriptionResponse> {
  const request: CreateSubscriptionRequest = { url: "https://example.com/hooks", events: ["*"], ...body };
  return (await api.post("/v1/subscriptions", request, 201, { ...options, schema: createdSubscriptionSchema })).body;
}

/** Publishes an event (202, checked against its schema): the one helper of the api and worker tests. */
export async function publish(
  api: TestApi,
  body: PublishEventRequest,
  options: { key?: string | null; headers?: Record<string, string> } = {},
): Promise<EventResponse> {
  return (await api.post("/v1/events", body, 202, { ...options, schema: eventSchema })).body;
}
