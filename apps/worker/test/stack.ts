import { startTestApi, type TestApi } from "@webhooks/api/testing";
import { createLogger, loadConfig } from "@webhooks/core";
import { testEnv } from "@webhooks/testing";
import { type RunningWorker, startWorker } from "../src/index.ts";

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
  const worker = await startWorker(config, createLogger({ level: config.logLevel, name: "worker" }), {
    metrics: false,
  });
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
