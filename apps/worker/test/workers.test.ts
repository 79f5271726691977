import { startTestApi } from "@webhooks/api/testing";
import { loadConfig } from "@webhooks/core";
import { type ServiceProcess, spawnService, testEnv, waitFor } from "@webhooks/testing";
import { expect } from "vitest";
import { countByStatus, duplicates, publishBurst } from "./burst.ts";
import { workerTest as it } from "./fixtures.ts";
import { subscribe } from "./stack.ts";

it("shares 1,000 deliveries between 2 worker processes, never sending one twice at once", async ({
  database,
  receiver,
  defer,
}) => {
  const env = testEnv(database.url, { LOG_LEVEL: "debug", WORKER_CONCURRENCY: "20" });
  const api = await startTestApi(loadConfig({ ...env, LOG_LEVEL: "silent" }));
  defer(() => api.close());
  const rx = await receiver(() => ({ status: 200, delayMs: 3 }));
  const workers: ServiceProcess[] = [];
  defer(async () => {
    for (const worker of workers) worker.kill("SIGTERM");
    await Promise.all(workers.map((worker) => worker.exited));
  });
  const sub = await subscribe(api, { url: rx.url });
  rx.secrets.push(sub.secret);
  workers.push(await spawnService("worker", env), await spawnService("worker", env));

  const eventIds = await publishBurst(api, 1_000);
  await waitFor(async () => (await countByStatus(database.url)).delivered === 1_000, {
    timeoutMs: 90_000,
    what: "1,000 delivered",
  });

  const counts = rx.countsById();
  const dup = duplicates(counts);
  console.log(
    `[2 workers] ${counts.size}/1000 events received, duplicates: ${dup.ids} ids (${dup.extra} extra requests), max concurrent per id: ${rx.maxConcurrentPerId}`,
  );
  expect(rx.maxConcurrentPerId).toBe(1);
  expect(dup.extra).toBe(0);
  expect([...counts.keys()].sort()).toEqual([...eventIds].sort());
  expect(rx.received.every((webhook) => webhook.signatureValid)).toBe(true);
  // Both processes did part of the work. (Their log lines reach us through pipes, a little after
  // the database has the outcome.)
  const perWorker = () => workers.map((w) => w.output().split("attempt recorded").length - 1);
  await waitFor(() => perWorker()[0]! + perWorker()[1]! === 1_000, {
    what: "every attempt logged by one worker or the other",
  });
  expect(Math.min(...perWorker())).toBeGreaterThan(0);
});
