import { startTestApi, type TestApi } from "@webhooks/api/testing";
import { loadConfig } from "@webhooks/core";
import { createRedisConnection, DeliveryGate, queueLayoutFor } from "@webhooks/queue";
import { REDIS_URL, type ServiceProcess, testEnv } from "@webhooks/testing";
import { workerTest } from "./fixtures.ts";

/**
 * What the endpoint isolation tests share. `twoWorkerProcesses(overrides)`: two worker processes
 * sharing the API's database and queue, as in production.
 */
export const isolationTest = workerTest.extend("twoWorkerProcesses", async ({ database, workerProcess, defer }) => {
  return async (
    overrides: Record<string, string>,
  ): Promise<{ api: TestApi; env: Record<string, string>; workers: ServiceProcess[] }> => {
    const env = testEnv(database.url, overrides);
    const api = await startTestApi(loadConfig(env));
    defer(() => api.close());
    const workers = [await workerProcess(env), await workerProcess(env)];
    return { api, env, workers };
  };
});

export async function deliveriesOfSubscription(api: TestApi, subscriptionId: string): Promise<Record<string, any>[]> {
  const response = await api.call("GET", `/v1/deliveries?limit=100&subscription_id=${subscriptionId}`);
  return response.body.data;
}

/** The subscription as the API shows it, health included. */
export async function health(api: TestApi, subscriptionId: string): Promise<Record<string, any>> {
  return (await api.call("GET", `/v1/subscriptions/${subscriptionId}`)).body;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The gate as the workers of `env` see it, on a Redis connection of the test's own, closed after it. */
export function gateOf(env: Record<string, string>, defer: (close: () => Promise<unknown>) => void) {
  const redis = createRedisConnection(REDIS_URL, "gate");
  defer(async () => redis.disconnect());
  const layout = queueLayoutFor(loadConfig(env));
  return { redis, layout, gate: new DeliveryGate(redis, layout) };
}
