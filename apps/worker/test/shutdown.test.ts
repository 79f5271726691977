import { startTestApi } from "@webhooks/api/testing";
import { loadConfig } from "@webhooks/core";
import { testEnv, waitFor } from "@webhooks/testing";
import { expect } from "vitest";
import { countByStatus, publishBurst } from "./burst.ts";
import { workerTest } from "./fixtures.ts";
import { subscribe } from "./stack.ts";

/** `setUp(overrides, delayMs)`: the API, and a receiver that answers after `delayMs`, subscribed. */
const it = workerTest.extend(
  "setUp",
  async ({ database, receiver, defer }) =>
    async (overrides: Record<string, string>, delayMs: number) => {
      const env = testEnv(database.url, { LOG_LEVEL: "info", ...overrides });
      const api = await startTestApi(loadConfig({ ...env, LOG_LEVEL: "silent" }));
      defer(() => api.close());
      const rx = await receiver(() => ({ status: 200, delayMs }));
      await subscribe(api, { url: rx.url });
      return { database, env, api, rx };
    },
);

it("on SIGTERM stops taking jobs, finishes the ones in flight and exits 0", async ({
  setUp,
  workerProcess,
  inProcessWorker,
}) => {
  const s = await setUp({ WORKER_CONCURRENCY: "5", SHUTDOWN_TIMEOUT: "10s" }, 1_500);
  const worker = await workerProcess(s.env);
  await publishBurst(s.api, 8, { concurrency: 1 });
  await waitFor(() => s.rx.received.length === 5, { what: "5 requests in flight" });
  const signalled = Date.now();
  worker.kill("SIGTERM");
  expect(await worker.exited).toBe(0);
  // It waited for the receiver's answers (1.5 s) rather than dropping the requests.
  expect(Date.now() - signalled).toBeGreaterThan(500);
  expect(worker.output()).toContain("worker stopped");
  // The 5 in flight were recorded; the other 3 were never taken.
  expect(await countByStatus(s.database.url)).toEqual({ delivered: 5, queued: 3 });
  expect(s.rx.received).toHaveLength(5);

  // They are still queued in Redis, and the next worker delivers them.
  await inProcessWorker({ ...s.env, LOG_LEVEL: "silent" });
  await waitFor(async () => (await countByStatus(s.database.url)).delivered === 8, { what: "the remaining 3" });
  expect(s.rx.received).toHaveLength(8);
});

it("exits 0 at the shutdown deadline when a request outlasts it, and the delivery is not lost", async ({
  setUp,
  workerProcess,
  inProcessWorker,
}) => {
  const s = await setUp(
    { WORKER_CONCURRENCY: "5", SHUTDOWN_TIMEOUT: "500ms", DELIVERY_TIMEOUT: "4s", JOB_LOCK_DURATION: "1s" },
    3_000,
  );
  const worker = await workerProcess(s.env);
  await publishBurst(s.api, 1);
  await waitFor(() => s.rx.received.length === 1, { what: "the request in flight" });
  const signalled = Date.now();
  worker.kill("SIGTERM");
  expect(await worker.exited).toBe(0);
  // It did not wait for the receiver's answer: the first worker recorded nothing.
  expect(worker.output()).toContain("leaving them to another worker");
  expect(Date.now() - signalled).toBeLessThan(10_000);
  expect(await countByStatus(s.database.url)).toEqual({ queued: 1 });

  // Another worker takes the abandoned job over once its lease runs out.
  await inProcessWorker({ ...s.env, LOG_LEVEL: "silent" });
  await waitFor(async () => (await countByStatus(s.database.url)).delivered === 1, {
    timeoutMs: 30_000,
    what: "the abandoned delivery",
  });
  // Delivery is at least once: the receiver saw the abandoned request and the retry.
  expect(s.rx.received).toHaveLength(2);
});
