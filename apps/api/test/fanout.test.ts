import { subscribe, type TestApi } from "@webhooks/api/testing";
import { type DispatchJob, isId, jobCatalog, newId } from "@webhooks/core";
import { sql, type TestDatabase, waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { eventSchema } from "../src/events/schemas.ts";
import { apiTest } from "./fixtures.ts";

/**
 * One event to 10,000 subscriptions: the deliveries are matched and numbered
 * in SQL, and their jobs are added after commit in chunks, after the 202.
 */
const FAN_OUT = 10_000;

const test = apiTest();

async function subscribeTo(api: TestApi, events: string[], extra: Record<string, unknown> = {}): Promise<string> {
  return (await subscribe(api, { url: "https://example.com/in", events, ...extra })).id;
}

/** Copies of a subscription made through the API, written in one statement (10,000 POSTs would take a while). */
async function cloneSubscription(database: TestDatabase, id: string, count: number): Promise<string[]> {
  const ids = Array.from({ length: count }, () => newId("subscription"));
  await sql(
    database.url,
    `INSERT INTO subscriptions (id, url, events, active, secret_id, max_in_flight, headers)
     SELECT new.id, s.url, s.events, s.active, s.secret_id, s.max_in_flight, s.headers
     FROM subscriptions s, unnest($2::text[]) AS new(id) WHERE s.id = $1`,
    [id, ids],
  );
  return ids;
}

describe("fan-out to 10,000 subscriptions", () => {
  test("creates exactly one delivery per matching subscription and queues each once", async ({ api, database }) => {
    const first = await subscribeTo(api, ["fan.out", "other"]);
    const wildcard = await subscribeTo(api, ["*"]);
    const matching = [first, wildcard, ...(await cloneSubscription(database, first, FAN_OUT - 2))].sort();
    await subscribeTo(api, ["fan.other"]);
    await subscribeTo(api, ["fan.out"], { active: false });

    const started = performance.now();
    const response = await api.post("/v1/events", { type: "fan.out", data: { n: 1 } }, 202, { schema: eventSchema });
    const elapsed = performance.now() - started;
    expect(response.status).toBe(202);
    // Informative only (the machine is shared): the bench's fan-out phase measures it properly.
    console.log(`POST /v1/events to ${FAN_OUT} subscriptions answered in ${Math.round(elapsed)} ms`);

    const rows = await sql<{ id: string; subscription_id: string; status: string; event_type: string }>(
      database.url,
      "SELECT id, subscription_id, status, event_type FROM deliveries WHERE event_id = $1 ORDER BY id",
      [response.body.id],
    );
    expect(rows).toHaveLength(FAN_OUT);
    expect(rows.map((row) => row.subscription_id).sort()).toEqual(matching);
    expect(
      rows.every((row) => isId("delivery", row.id) && row.status === "queued" && row.event_type === "fan.out"),
    ).toBe(true);
    // Numbered in SQL in subscription order, the ids sort as the subscriptions do.
    expect(rows.map((row) => row.subscription_id)).toEqual(matching);

    // The jobs follow the 202 in chunks, as dispatch jobs of 20: wait for all of them, then check
    // that each delivery is in exactly one, with its subscription.
    const queue = api.queue.queue;
    const dispatches = FAN_OUT / jobCatalog.deliveries.dispatch.maxDeliveries;
    await waitFor(async () => (await queue.getJobCountByTypes("waiting")) >= dispatches, {
      timeoutMs: 60_000,
      what: `${dispatches} dispatch jobs`,
    });
    const jobs = await queue.getJobs(["waiting"], 0, -1);
    expect(jobs).toHaveLength(dispatches);
    const dispatched = jobs.flatMap((job) => (job.data as DispatchJob).deliveries);
    expect(dispatched.map((entry) => entry.deliveryId).sort()).toEqual(rows.map((row) => row.id));
    const subscriptionOf = new Map(rows.map((row) => [row.id, row.subscription_id]));
    expect(dispatched.every((entry) => entry.subscriptionId === subscriptionOf.get(entry.deliveryId))).toBe(true);
    expect(await api.queue.dispatching()).toBe(FAN_OUT);
  }, 120_000);
});
