import { newId } from "@webhooks/core";
import type { TestDatabase } from "@webhooks/testing";
import { sql } from "@webhooks/testing";

export interface SeedRow {
  status: "queued" | "delivered" | "failed";
  createdAt: Date;
  responseCode?: number | null;
  /** A failed delivery with a retry planned. */
  retryAt?: Date;
}

/** Deliveries written straight into the table, as a long-running service would have them. */
export async function seedDeliveries(
  database: TestDatabase,
  subscriptionId: string,
  rows: SeedRow[],
): Promise<string[]> {
  const [sub] = await sql<{ secret_id: string; url: string }>(
    database.url,
    "SELECT secret_id, url FROM subscriptions WHERE id = $1",
    [subscriptionId],
  );
  const eventId = newId("event");
  await sql(database.url, "INSERT INTO events (id, type, data) VALUES ($1, 'invoice.paid', '{}')", [eventId]);
  const ids = rows.map(() => newId("delivery"));
  await sql(
    database.url,
    `INSERT INTO deliveries (id, subscription_id, event_id, event_type, url, secret_id, status, attempts, response_code, next_attempt_at, created_at, updated_at)
     SELECT d.id, $2, $3, 'invoice.paid', $4, $5, d.status::delivery_status, CASE WHEN d.status = 'queued' THEN 0 ELSE 1 END,
            d.response_code, d.next_attempt_at, d.created_at, d.created_at
     FROM unnest($1::text[], $6::text[], $7::int[], $8::timestamptz[], $9::timestamptz[]) AS d(id, status, response_code, next_attempt_at, created_at)`,
    [
      ids,
      subscriptionId,
      eventId,
      sub!.url,
      sub!.secret_id,
      rows.map((r) => r.status),
      rows.map((r) =>
        r.responseCode === undefined
          ? r.status === "delivered"
            ? 200
            : r.status === "failed"
              ? 500
              : null
          : r.responseCode,
      ),
      rows.map((r) => (r.status === "queued" ? r.createdAt : (r.retryAt ?? null))),
      rows.map((r) => r.createdAt),
    ],
  );
  return ids;
}
