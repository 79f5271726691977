import { createLogger, loadConfig } from "@webhooks/core";
import { createTestDatabase, startReceiver, testEnv, type TestReceiver } from "@webhooks/testing";
import { afterEach } from "vitest";
import { startTestApi, type TestApi } from "@webhooks/api/testing";
import { startWorker, type RunningWorker } from "../src/index.ts";

export interface Stack {
  api: TestApi;
  worker: RunningWorker;
  env: Record<string, string>;
  close(): Promise<void>;
}

/** The API and an in-process worker sharing one environment (database, Redis, queue prefix). */
export async function startStack(databaseUrl: string, overrides: Record<string, string> = {}): Promise<Stack> {
  const env = testEnv(databaseUrl, overrides);
  const config = loadConfig(env);
  const api = await startTestApi(config);
  const worker = await startWorker(config, createLogger({ level: config.logLevel, name: "worker" }), { metrics: false });
  let workerClosed = false;
  return {
    api,
    worker: {
      ...worker,
      async close() {
        if (workerClosed) return;
        workerClosed = true;
        await worker.close();
      },
    },
    env,
    async close() {
      if (!workerClosed) await worker.close();
      workerClosed = true;
      await api.close();
    },
  };
}

// One subscribe/publish for the api and worker tests: each checks its answer against the route's schema.
export { publish, subscribe } from "@webhooks/api/testing";

/** The deliveries of one event (the test's subscriptions only ever see their own events). */
export async function deliveriesOf(api: TestApi, eventId: string): Promise<Record<string, any>[]> {
  const response = await api.call("GET", "/v1/deliveries?limit=100");
  return response.body.data.filter((d: { event_id: string }) => d.event_id === eventId);
}

/**
 * A fresh database, API and worker per `stack()` and a real receiver per `receiver()`, all closed
 * after each test (most recent first), so tests never see each other's deliveries. `cleanup`
 * takes anything else a test starts. Call once at the top of a test file.
 */
export function perTestStacks() {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    // Close everything, then report the first failure, so one failing close leaks nothing.
    let failure: unknown;
    for (const close of cleanup.splice(0).reverse()) await close().catch((error: unknown) => (failure ??= error));
    if (failure !== undefined) throw failure;
  });
  return {
    cleanup,
    async stack(overrides: Record<string, string> = {}): Promise<Stack> {
      const database = await createTestDatabase();
      cleanup.push(() => database.drop());
      const started = await startStack(database.url, overrides);
      cleanup.push(() => started.close());
      return started;
    },
    async receiver(reply?: TestReceiver["reply"]): Promise<TestReceiver> {
      const started = await startReceiver(reply);
      cleanup.push(() => started.close());
      return started;
    },
  };
}
