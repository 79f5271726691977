import type { TestApi } from "@webhooks/api/testing";
import { sql } from "@webhooks/testing";

/** Publishes `count` events of `type` through the API, `concurrency` requests at a time. */
export async function publishBurst(
  api: TestApi,
  count: number,
  options: { type?: string; concurrency?: number; onProgress?: (published: number) => Promise<void> | void } = {},
): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const index = next++;
      const response = await api.call("POST", "/v1/events", {
        json: { type: options.type ?? "burst.event", data: { index } },
      });
      if (response.status !== 202)
        throw new Error(`publish ${index} answered ${response.status}: ${JSON.stringify(response.body)}`);
      ids.push(response.body.id);
      await options.onProgress?.(ids.length);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency ?? 20 }, worker));
  return ids;
}

export async function countByStatus(databaseUrl: string): Promise<Record<string, number>> {
  const rows = await sql<{ status: string; n: string }>(
    databaseUrl,
    "SELECT status::text AS status, count(*) AS n FROM deliveries GROUP BY 1",
  );
  return Object.fromEntries(rows.map((row) => [row.status, Number(row.n)]));
}

/**
 * Attempts beyond the first that the database recorded: retries after a failed or timed-out
 * attempt. An extra request the receiver saw that is not among these was an attempt whose
 * outcome was never recorded (e.g. its worker was killed mid-request).
 */
export async function recordedRetries(databaseUrl: string): Promise<number> {
  const [row] = await sql<{ n: string }>(databaseUrl, "SELECT coalesce(sum(attempts - 1), 0) AS n FROM deliveries");
  return Number(row?.n ?? 0);
}

/** How many event ids the receiver got more than once, and how many extra requests that made. */
export function duplicates(counts: Map<string, number>): { ids: number; extra: number } {
  let ids = 0;
  let extra = 0;
  for (const n of counts.values()) {
    if (n > 1) {
      ids++;
      extra += n - 1;
    }
  }
  return { ids, extra };
}

/**
 * Per event: the attempts its delivery counts, and the attempts in its log, of which those whose
 * outcome is unknown (their worker died mid-send).
 */
export async function attemptsByEvent(
  databaseUrl: string,
): Promise<Map<string, { attempts: number; logged: number; unknown: number }>> {
  const rows = await sql<{ event_id: string; attempts: number; logged: string; unknown: string }>(
    databaseUrl,
    `SELECT d.event_id, d.attempts, count(a.id) AS logged, count(a.id) FILTER (WHERE a.error LIKE 'outcome unknown%') AS unknown
     FROM deliveries d LEFT JOIN delivery_attempt_log a ON a.delivery_id = d.id GROUP BY d.id`,
  );
  return new Map(
    rows.map((row) => [
      row.event_id,
      { attempts: row.attempts, logged: Number(row.logged), unknown: Number(row.unknown) },
    ]),
  );
}
