import { createTestDatabase, type TestDatabase } from "@webhooks/testing";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { CLAIM_SQL } from "../src/delivery-leases.ts";

// The claim runs as a named statement, whose plan PostgreSQL may cache as a generic plan made from
// the statistics of the moment. Statistics taken while nothing was due (a quiet hour, a fresh
// install) say the partial due index is empty; a plan that walks it then reads every due delivery
// on each claim once a backlog fills it. The claim must find its deliveries by id whatever the
// statistics say: this builds exactly that case and reads the generic plan.

let database: TestDatabase;
let client: pg.Client;

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  Plans?: PlanNode[];
}

const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

beforeAll(async () => {
  database = await createTestDatabase();
  client = new pg.Client({ connectionString: database.url });
  await client.connect();
  // Rows consistent by construction, so foreign keys are not checked during the load.
  await client.query("SET session_replication_role = replica");
  await client.query("INSERT INTO signing_secrets (id, ciphertext) VALUES ('sec_1', '\\x00')");
  await client.query("INSERT INTO events (id, type, data) VALUES ('evt_1', 'invoice.paid', '{}')");
  await client.query(
    "INSERT INTO subscriptions (id, url, events, secret_id) VALUES ('sub_1', 'https://example.com/', ARRAY['*'], 'sec_1')",
  );
  const insertDeliveries = (from: number, count: number, due: boolean) =>
    client.query(
      `INSERT INTO deliveries (id, subscription_id, event_id, event_type, url, secret_id, status, attempts, response_code, next_attempt_at, created_at, updated_at)
       SELECT 'dlv_' || lpad(n::text, 26, '0'), 'sub_1', 'evt_1', 'invoice.paid', 'https://example.com/', 'sec_1',
              CASE WHEN $3 THEN 'queued' ELSE 'delivered' END::delivery_status, CASE WHEN $3 THEN 0 ELSE 1 END,
              CASE WHEN $3 THEN NULL ELSE 200 END, CASE WHEN $3 THEN now() - interval '1 minute' END, now(), now()
       FROM generate_series($1::int, $1::int + $2::int - 1) AS n`,
      [from, count, due],
    );
  // The statistics see a log where nothing is due...
  await insertDeliveries(0, 20_000, false);
  await client.query("VACUUM ANALYZE deliveries");
  // ...and the first deliveries of a burst are due when the plan is made: the due index is still
  // small on disk, so walking it looks as cheap as the primary key. The plan stays cached while
  // the burst grows into a backlog.
  await insertDeliveries(20_000, 10, true);
  await client.query("SET session_replication_role = origin");
}, 120_000);

afterAll(async () => {
  await client.end();
  await database.drop();
});

it("finds the deliveries it claims by id, not by walking the due index, whatever the statistics say", async () => {
  await client.query("SET plan_cache_mode = force_generic_plan");
  await client.query(`PREPARE claim AS ${CLAIM_SQL}`);
  const ids = [`dlv_${"20001".padStart(26, "0")}`, `dlv_${"20002".padStart(26, "0")}`];
  const array = (values: string[]) => `ARRAY[${values.map((value) => client.escapeLiteral(value)).join(", ")}]`;
  const { rows } = await client.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(
    `EXPLAIN (FORMAT JSON) EXECUTE claim(${array(ids)}, ${array(["lease-1", "lease-2"])}, 60000, 500, ${array(["att_1", "att_2"])}, 'unknown')`,
  );
  const plan = nodes(rows[0]!["QUERY PLAN"][0].Plan);
  const onDeliveries = plan.filter(
    (node) => node["Relation Name"] === "deliveries" && node["Node Type"] !== "ModifyTable",
  );

  expect(onDeliveries.length).toBeGreaterThan(0);
  // Every read of deliveries goes through its primary key, but the one probe of an ordered
  // delivery's line for its head, through the line's index: no walk of the due index, no scan.
  const reads = onDeliveries.map((node) => `${node["Node Type"]} ${node["Index Name"] ?? ""}`.trim());
  expect(reads.filter((read) => read !== "Index Scan deliveries_pkey")).toEqual(["Index Scan deliveries_line_idx"]);
});
