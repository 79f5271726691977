import { withClient } from "@webhooks/testing";
import { createUlidFunction } from "../seed-sql.ts";

/**
 * Gives a fresh database the history of one in service before a throughput run: `deliveries`
 * delivered deliveries (one attempt each) of past events, spread over the run's subscriptions,
 * from the hour before, then VACUUM ANALYZE as autovacuum would have run. Every row it writes is
 * older than the `seededBefore` it returns.
 *
 * Why: the services cache one plan per statement and connection, made at its first executions.
 * On an empty, never-analyzed table those plans scan the whole table (the cheapest way to read a
 * few pages), and they stay cached while the table grows through the run: measured here, that
 * is ~0.17 ms more PostgreSQL CPU per W1 delivery. A database in service has statistics, and
 * the plans look rows up by key; that is what these phases measure.
 *
 * It writes only columns every version of the schema has, so the code from before endpoint
 * isolation can be measured on the same history.
 */
export async function seedHistory(databaseUrl: string, deliveries: number): Promise<{ seededBefore: Date }> {
  return withClient(databaseUrl, async (db) => {
    await createUlidFunction(db);
    // The rows are consistent by construction: foreign keys are not checked during the load.
    await db.query("SET session_replication_role = replica");
    await db.query(
      `WITH subs AS (SELECT row_number() OVER (ORDER BY id) - 1 AS slot, count(*) OVER () AS n, id, url, secret_id FROM subscriptions),
            past AS (SELECT k, date_trunc('milliseconds', now() - interval '1 hour' + k * (interval '1 hour' / $1::int)) AS at
                     FROM generate_series(0, $1::int - 1) AS k),
            event AS (
              INSERT INTO events (id, type, data, created_at)
              SELECT 'evt_' || pg_temp.ulid(p.at, p.k), 'history.seeded', jsonb_build_object('seq', p.k), p.at FROM past p
              RETURNING id, created_at
            ),
            delivery AS (
              INSERT INTO deliveries (id, subscription_id, event_id, event_type, url, secret_id, status, attempts, response_code,
                                      next_attempt_at, created_at, updated_at)
              SELECT 'dlv_' || pg_temp.ulid(e.created_at, p.k), s.id, e.id, 'history.seeded', s.url, s.secret_id, 'delivered', 1, 200,
                     NULL, e.created_at, e.created_at
              FROM past p
              JOIN event e ON e.id = 'evt_' || pg_temp.ulid(p.at, p.k)
              JOIN subs s ON s.slot = p.k % s.n
              RETURNING id, url, created_at
            )
       INSERT INTO delivery_attempts (id, delivery_id, number, url, started_at, duration_ms, response_code)
       SELECT 'att_' || substr(d.id, 5), d.id, 1, d.url, d.created_at, 5, 200 FROM delivery d`,
      [deliveries],
    );
    await db.query("SET session_replication_role = origin");
    await db.query("VACUUM ANALYZE");
    const { rows } = await db.query<{ now: Date }>("SELECT now()");
    return { seededBefore: rows[0]!.now };
  });
}
