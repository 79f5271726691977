import { jobCatalog, type Logger } from "@webhooks/core";
import { connectRedis, dispatchJobId, queueLayoutFor } from "@webhooks/queue";
import { waitFor } from "@webhooks/testing";
import { expect } from "vitest";
import { createDeliveryWorker } from "../src/delivery-worker.ts";
import { workerTest as it } from "./fixtures.ts";

// Issue: the worker logged "worker error (Redis unreachable?)" when a job's lock could not be
// renewed while Redis was fine. A lock that cannot be renewed means the job left this worker (it
// was parked or rescheduled, or another worker took it over after a stall): the log must say so,
// once, and not as a Redis error.

interface LogLine {
  level: "debug" | "info" | "warn" | "error";
  fields: Record<string, unknown>;
  message: string;
}

/** A Logger that keeps what it is given, to read back in the test. */
function capturingLogger(lines: LogLine[]): Logger {
  const at = (level: LogLine["level"]) => (fields: Record<string, unknown> | string, message?: string) =>
    void lines.push(
      typeof fields === "string" ? { level, fields: {}, message: fields } : { level, fields, message: message ?? "" },
    );
  const logger = { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error"), child: () => logger };
  return logger as unknown as Logger;
}

it("a job whose lock another worker took is logged as having left this worker, not as a Redis error", async ({
  queuedAttempt,
  defer,
}) => {
  const LOCK_MS = 1_000;
  const lines: LogLine[] = [];
  // The request is held open until the test has taken the job's lock away.
  let sending = false;
  let answer: () => void = () => {};
  const answered = new Promise<void>((resolve) => (answer = resolve));
  const { config, redis, deps, deliveryId } = await queuedAttempt({
    gate: { acquire: async () => ({ go: true, probe: false, wakes: [] }), release: async () => [] },
    sender: {
      send: async () => {
        sending = true;
        await answered;
        return { durationMs: 1, responseCode: 200, responseBody: "", retryAfter: null, error: null, timedOut: false };
      },
    },
    logger: capturingLogger(lines),
  });
  const workerRedis = connectRedis(config, "worker");
  defer(async () => workerRedis.disconnect());
  const layout = queueLayoutFor(config);
  const prefix = layout.shardPrefixes[0]!;
  const worker = createDeliveryWorker(deps, { connection: workerRedis, prefix, concurrency: 1, lockMs: LOCK_MS });
  defer(async () => {
    answer();
    await worker.close(true);
  });
  void worker.run();

  await waitFor(() => sending, { timeoutMs: 10_000 });
  // What a stall takeover does to this worker's view: its lock is gone (another worker would hold its own).
  // The published delivery is in a dispatch job (see the job catalog).
  const jobId = dispatchJobId(deliveryId);
  await redis.del(`${prefix}:${jobCatalog.deliveries.queueName}:${jobId}:lock`);
  // BullMQ renews locks every half lockDuration; the next renewal finds the lock gone.
  await waitFor(() => lines.some((line) => line.message.startsWith("could not renew the lock")), { timeoutMs: 10_000 });
  answer();

  const renewal = lines.filter((line) => line.message.startsWith("could not renew the lock"));
  expect(renewal).toHaveLength(1);
  expect(renewal[0]).toMatchObject({
    level: "warn",
    fields: { jobIds: [jobId] },
    message: "could not renew the lock of jobs that left this worker (parked, rescheduled or taken over after a stall)",
  });
  expect(lines.filter((line) => line.level === "error")).toEqual([]);
});
