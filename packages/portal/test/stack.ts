// The real thing for the portal's browser tests: the API and a worker as processes started the way
// `npm start` starts them, against a database of their own, and a receiver on loopback.
import { createServer } from "node:net";
import { createRedisConnection, waitUntilConnected } from "@webhooks/queue";
import {
  createTestDatabase,
  REDIS_URL,
  spawnService,
  startReceiver,
  TEST_API_KEY,
  type TestDatabase,
  type TestReceiver,
  testEnv,
} from "@webhooks/testing";

export interface PortalStack {
  baseUrl: string;
  database: TestDatabase;
  receiver: TestReceiver;
  /** A call to the API with the test's unscoped key (or `key`); the parsed body and status. */
  call<T = any>(method: string, path: string, json?: unknown, key?: string): Promise<{ status: number; body: T }>;
  /**
   * One more API process on the same database, with `overrides` on top of the stack's settings
   * (a deployment's branding); its base URL. Closed with the stack.
   */
  startApi(overrides: Record<string, string>): Promise<string>;
  close(): Promise<void>;
}

/** A port that was free a moment ago: PUBLIC_URL must name the API's port before it starts. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export async function startPortalStack(receiverReply: TestReceiver["reply"]): Promise<PortalStack> {
  const database = await createTestDatabase();
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const env = testEnv(database.url, {
    LOG_LEVEL: "info",
    PORT: String(port),
    PUBLIC_URL: baseUrl,
    // One quick retry, so a failing endpoint's deliveries fail for good within a second.
    RETRY_SCHEDULE: "100ms",
    // The failing endpoint must not trip its circuit breaker and hold the test's deliveries.
    CIRCUIT_FAILURE_THRESHOLD: "100",
  });
  const receiver = await startReceiver(receiverReply);
  // Both at once: neither waits for the other to start.
  const starting = await Promise.allSettled([spawnService("api", env), spawnService("worker", env)]);
  const started = starting.flatMap((result) => (result.status === "fulfilled" ? [result.value] : []));
  const failure = starting.find((result): result is PromiseRejectedResult => result.status === "rejected");
  if (failure) {
    for (const service of started) service.kill("SIGKILL");
    await receiver.close();
    await database.drop();
    throw failure.reason;
  }

  return {
    baseUrl,
    database,
    receiver,
    async call(method, path, json, key = TEST_API_KEY) {
      const response = await fetch(`${baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(json === undefined ? {} : { "content-type": "application/json" }),
        },
        body: json === undefined ? undefined : JSON.stringify(json),
      });
      return { status: response.status, body: await response.json() };
    },
    async startApi(overrides) {
      const apiPort = await freePort();
      const apiUrl = `http://127.0.0.1:${apiPort}`;
      started.push(await spawnService("api", { ...env, PORT: String(apiPort), PUBLIC_URL: apiUrl, ...overrides }));
      return apiUrl;
    },
    async close() {
      for (const service of started) service.kill("SIGTERM");
      await Promise.all(started.map((service) => service.exited));
      await receiver.close();
      // The worker made its queue's keys under this test's prefix: leave none behind.
      const redis = createRedisConnection(REDIS_URL, "producer");
      await waitUntilConnected(redis);
      const keys = await redis.keys(`${env.QUEUE_PREFIX}:*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
      await database.drop();
    },
  };
}
