import type { TestApi } from "@webhooks/api/testing";
import { newId } from "@webhooks/core";
import { sql, type TestReceiver, waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { isolationTest as it } from "./isolation-fixtures.ts";
import { publish, subscribe } from "./stack.ts";

/**
 * Many subscriptions on one origin (docs/architecture.md#origin-lines): deliveries that wait for
 * the origin's room are woken as attempts there end, so that they drain at the receiver's pace,
 * never more than ORIGIN_MAX_IN_FLIGHT at once. The reconciler runs once at start and then not for
 * an hour, and no delivery waits long enough for a parked job's fallback timer: every delivery
 * that arrives was woken by the gate.
 */
const NO_RECONCILER = { RECONCILE_INTERVAL: "1h" };

/**
 * `count` subscriptions to `type`, each at a path of its own on the receiver (one origin): one made
 * through the API, for its secret, the others copies of it written in one statement.
 */
async function subscriptionsOnOneOrigin(
  databaseUrl: string,
  api: TestApi,
  rx: TestReceiver,
  type: string,
  count: number,
): Promise<void> {
  const first = await subscribe(api, { url: `${rx.url}/s/0`, events: [type] });
  rx.secrets.push(first.secret);
  await sql(
    databaseUrl,
    `INSERT INTO subscriptions (id, url, events, active, secret_id, max_in_flight, headers)
     SELECT copy.id, $3 || '/s/' || copy.n, s.events, s.active, s.secret_id, s.max_in_flight, s.headers
     FROM subscriptions s, unnest($2::text[]) WITH ORDINALITY AS copy(id, n) WHERE s.id = $1`,
    [first.id, Array.from({ length: count - 1 }, () => newId("subscription")), rx.url],
  );
}

/** Every path received exactly once, each signed correctly. */
function expectEachOnce(rx: TestReceiver, count: number): void {
  const paths = rx.received.map((webhook) => webhook.path);
  expect(new Set(paths).size).toBe(count);
  expect(paths).toHaveLength(count);
  expect(rx.received.every((webhook) => webhook.signatureValid)).toBe(true);
}

describe("deliveries waiting for their origin", () => {
  it("drain 300 subscriptions on an origin capped at 5, never more than 5 open at the receiver", async ({
    database,
    stack,
    receiver,
  }) => {
    const s = await stack({ ...NO_RECONCILER, ORIGIN_MAX_IN_FLIGHT: "5", WORKER_CONCURRENCY: "50" });
    const rx = await receiver(() => ({ status: 200, delayMs: 20 }));
    await subscriptionsOnOneOrigin(database.url, s.api, rx, "origin.capped", 300);
    await publish(s.api, { type: "origin.capped", data: {} });
    await waitFor(() => rx.received.length === 300, { timeoutMs: 60_000, what: "300 deliveries" });
    expectEachOnce(rx, 300);
    expect(rx.maxConcurrent).toBeLessThanOrEqual(5);
    expect(rx.maxConnections).toBeLessThanOrEqual(5);
  });

  it("drain 10,000 subscriptions on one origin at its default cap, with the process's slots full of new deliveries", async ({
    database,
    stack,
    receiver,
  }) => {
    // 250 attempts at once in the process for an origin cap of 50: most new deliveries find the
    // origin full, and the woken ones must not wait behind them until their turns lapse.
    const s = await stack({ ...NO_RECONCILER, WORKER_CONCURRENCY: "250" });
    const rx = await receiver();
    await subscriptionsOnOneOrigin(database.url, s.api, rx, "origin.default", 10_000);
    await publish(s.api, { type: "origin.default", data: {} });
    await waitFor(() => rx.received.length === 10_000, { timeoutMs: 150_000, what: "10,000 deliveries" });
    expectEachOnce(rx, 10_000);
    expect(rx.maxConcurrent).toBeLessThanOrEqual(50);
    expect(rx.maxConnections).toBeLessThanOrEqual(50);
  }, 240_000);

  it("drain within the cap when one of two worker processes is killed mid-run with slots and turns", async ({
    database,
    receiver,
    twoWorkerProcesses,
  }) => {
    // What the killed worker held comes back when its leases end (DELIVERY_TIMEOUT + 5 s) and its
    // turns lapse (10 s); the reconciler's nudge then gives the origin's room to its line.
    const { api, workers } = await twoWorkerProcesses({
      RECONCILE_INTERVAL: "1s",
      ORIGIN_MAX_IN_FLIGHT: "4",
      WORKER_CONCURRENCY: "20",
      DELIVERY_TIMEOUT: "1s",
      JOB_LOCK_DURATION: "2s",
    });
    const rx = await receiver(() => ({ status: 200, delayMs: 50 }));
    await subscriptionsOnOneOrigin(database.url, api, rx, "origin.killed", 200);
    await publish(api, { type: "origin.killed", data: {} });
    await waitFor(() => rx.received.length >= 40, { what: "the run to be under way" });
    workers[0]!.kill("SIGKILL");
    await workers[0]!.exited;
    await waitFor(() => new Set(rx.received.map((webhook) => webhook.path)).size === 200, {
      timeoutMs: 90_000,
      what: "all 200 delivered",
    });
    expect(rx.maxConcurrent).toBeLessThanOrEqual(4);
    expect(rx.received.every((webhook) => webhook.signatureValid)).toBe(true);
  });
});
