import { createSubscription, findDueDeliveries, publishEvents, withReconcilerLock } from "@webhooks/db";
import { sql } from "@webhooks/testing";
import { expect, it } from "vitest";
import { fileDatabase, subscriptionContext } from "./file-database.ts";

const file = fileDatabase();

it("pages through every due delivery, skipping leased and finished ones", async () => {
  await createSubscription(subscriptionContext(file.database), { url: "https://example.com/due", events: ["*"] });
  const ctx = { sql: file.database.sql };
  await publishEvents(
    ctx,
    Array.from({ length: 7 }, (_, i) => ({ type: "due.test", data: { i } })),
  );
  // All due a minute ago, in a known order; then one is leased, one delivered, one retrying later.
  await sql(
    file.url,
    `
    WITH ordered AS (SELECT id, row_number() OVER (ORDER BY id) AS n FROM deliveries)
    UPDATE deliveries d SET next_attempt_at = now() - interval '1 minute' + n * interval '1 second'
    FROM ordered WHERE ordered.id = d.id`,
  );
  const ids = (await sql<{ id: string }>(file.url, "SELECT id FROM deliveries ORDER BY next_attempt_at, id")).map(
    (r) => r.id,
  );
  await sql(
    file.url,
    "UPDATE deliveries SET leased_until = now() + interval '1 minute', lease_token = 't' WHERE id = $1",
    [ids[1]],
  );
  await sql(file.url, "UPDATE deliveries SET status = 'delivered', next_attempt_at = NULL WHERE id = $1", [ids[3]]);
  await sql(
    file.url,
    "UPDATE deliveries SET status = 'failed', next_attempt_at = now() + interval '1 hour' WHERE id = $1",
    [ids[5]],
  );

  const seen: string[] = [];
  let after: { nextAttemptAt: Date; id: string } | undefined;
  for (let page = 0; page < 10; page++) {
    const due = await findDueDeliveries({ sql: file.database.sql }, { graceMs: 1_000, limit: 2, after });
    if (due.length === 0) break;
    expect(due.length).toBeLessThanOrEqual(2);
    seen.push(...due.map((row) => row.id));
    after = due.at(-1);
  }
  expect(seen).toEqual([ids[0], ids[2], ids[4], ids[6]]);
});

it("fails a pass whose connection PostgreSQL drops, without crashing the process, and the pool goes on", async () => {
  // The reconciler holds one connection for its whole pass. A backend that goes away meanwhile (a
  // restart, a failover) made the checked-out client emit an 'error' nobody listened to: an
  // uncaught exception, and the worker process exited 1 (vitest reports it as an unhandled error).
  const pass = withReconcilerLock({ sql: file.database.sql }, async (locked) => {
    const [backend] = await locked.query<{ pid: number }>("SELECT pg_backend_pid() AS pid", []);
    await sql(file.url, "SELECT pg_terminate_backend($1)", [backend!.pid]);
    // Idle while the termination arrives, as between two of a pass's statements.
    await new Promise((resolve) => setTimeout(resolve, 300));
    return locked.query("SELECT 1", []);
  });
  await expect(pass).rejects.toThrow();
  // The broken client was destroyed, not returned: the next queries get a working connection.
  expect(await file.database.sql.query<{ one: number }>("SELECT 1 AS one", [])).toEqual([{ one: 1 }]);
  expect(await withReconcilerLock({ sql: file.database.sql }, async () => "locked again")).toBe("locked again");
});
