import {
  type DeliveryFilters,
  deliveryListQuery,
  type PageQuery,
  pageStatement,
  subscriptionListQuery,
  type TenantScope,
  tenantScope,
  UNSCOPED,
} from "@webhooks/db";
import { createTestDatabase, type TestDatabase } from "@webhooks/testing";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// The per-tenant lists must keep the list latency targets: each filter combination reads the
// page along an index in list order (no scan of the table, no sort), through the partial tenant
// indexes of prisma/schema.prisma, or a subscription's own indexes when one is named. The SQL
// EXPLAINed is the lists' own (deliveryListQuery, subscriptionListQuery, pageStatement), planned
// both for its values and as the generic plan a named statement may switch to.

let database: TestDatabase;
let client: pg.Client;

const SUBSCRIPTIONS = 20_000;
const DELIVERIES = 100_000;
const id = (prefix: string, n: number) => `${prefix}_${String(n).padStart(26, "0")}`;
/** Subscription k belongs to tenant `t<k % 50>` when k is odd, to none when it is even. */
const T7 = tenantScope("t7");
const SUB_OF_T7 = id("sub", 7);
const SUB_OF_T9 = id("sub", 9);

beforeAll(async () => {
  database = await createTestDatabase();
  client = new pg.Client({ connectionString: database.url });
  await client.connect();
  // Rows consistent by construction, so foreign keys are not checked during the load.
  await client.query("SET session_replication_role = replica");
  await client.query("INSERT INTO signing_secrets (id, ciphertext) VALUES ('sec_1', '\\x00')");
  await client.query("INSERT INTO events (id, type, data) VALUES ('evt_1', 'invoice.paid', '{}')");
  await client.query(
    `INSERT INTO subscriptions (id, url, events, secret_id, tenant_id, created_at)
     SELECT 'sub_' || lpad(k::text, 26, '0'), 'https://example.com/' || k, ARRAY['*'], 'sec_1',
            CASE WHEN k % 2 = 1 THEN 't' || (k % 50) END, now() - k * interval '1 minute'
     FROM generate_series(0, $1::int - 1) AS k`,
    [SUBSCRIPTIONS],
  );
  // Delivery n goes to subscription n % SUBSCRIPTIONS and carries its tenant; statuses and codes
  // as the bench's seed (80% delivered, 15% failed with 500/503/404, 5% queued).
  await client.query(
    `INSERT INTO deliveries (id, subscription_id, event_id, event_type, url, secret_id, tenant_id, status, attempts, response_code, created_at, updated_at)
     SELECT 'dlv_' || lpad(n::text, 26, '0'), 'sub_' || lpad((n % $2::int)::text, 26, '0'), 'evt_1',
            (ARRAY['invoice.paid', 'invoice.created', 'customer.updated', 'charge.refunded', 'payout.failed'])[n % 5 + 1],
            'https://example.com/', 'sec_1',
            CASE WHEN (n % $2::int) % 2 = 1 THEN 't' || ((n % $2::int) % 50) END,
            CASE WHEN n % 20 = 0 THEN 'queued' WHEN n % 20 <= 3 THEN 'failed' ELSE 'delivered' END::delivery_status,
            1,
            CASE n % 20 WHEN 0 THEN NULL WHEN 1 THEN 500 WHEN 2 THEN 503 WHEN 3 THEN 404 WHEN 4 THEN 204 ELSE 200 END,
            now() - n * interval '1 second', now()
     FROM generate_series(0, $1::int - 1) AS n`,
    [DELIVERIES, SUBSCRIPTIONS],
  );
  await client.query("SET session_replication_role = origin");
  await client.query("VACUUM ANALYZE");
}, 120_000);
afterAll(async () => {
  await client.end();
  await database.drop();
});

interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  "Actual Loops"?: number;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

function literal(value: unknown): string {
  if (typeof value === "number") return String(value);
  if (value instanceof Date) return client.escapeLiteral(value.toISOString());
  return client.escapeLiteral(String(value));
}

/** The page query's plan for its values (EXPLAIN ANALYZE), and its generic plan. */
async function plans(
  query: PageQuery,
  page: { limit: number; startingAfter?: string },
): Promise<{ custom: PlanNode[]; generic: PlanNode[] }> {
  const statement = pageStatement(query, page);
  const { rows } = await client.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(
    `EXPLAIN (ANALYZE, FORMAT JSON) ${statement.text}`,
    statement.values,
  );
  await client.query(`PREPARE list_page AS ${statement.text}`);
  try {
    await client.query("SET plan_cache_mode = force_generic_plan");
    const generic = await client.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(
      `EXPLAIN (FORMAT JSON) EXECUTE list_page(${statement.values.map(literal).join(", ")})`,
    );
    return { custom: nodes(rows[0]!["QUERY PLAN"][0].Plan), generic: nodes(generic.rows[0]!["QUERY PLAN"][0].Plan) };
  } finally {
    await client.query("RESET plan_cache_mode");
    await client.query("DEALLOCATE list_page");
  }
}

function expectIndexWalk(plan: PlanNode[], index: string, label: string) {
  const summary = plan
    .map((node) => (node["Index Name"] ? `${node["Node Type"]} using ${node["Index Name"]}` : node["Node Type"]))
    .join(" > ");
  expect(summary, label).not.toMatch(/Seq Scan|Sort|Bitmap Heap Scan/);
  expect(
    plan.some((node) => node["Index Name"] === index),
    `${label}: ${summary}`,
  ).toBe(true);
}

const deliveryCases: [string, TenantScope, DeliveryFilters, string][] = [
  ["scoped, no filter", T7, {}, "deliveries_tenant_created_at_id_idx"],
  ["unscoped, tenant_id filter", UNSCOPED, { tenantId: "t7" }, "deliveries_tenant_created_at_id_idx"],
  ["scoped + tenant_id filter", T7, { tenantId: "t7" }, "deliveries_tenant_created_at_id_idx"],
  ["status=failed", T7, { status: "failed" }, "deliveries_tenant_status_created_at_id_idx"],
  ["status=queued", UNSCOPED, { tenantId: "t7", status: "queued" }, "deliveries_tenant_status_created_at_id_idx"],
  ["response_code=500", T7, { responseCode: { code: 500 } }, "deliveries_tenant_response_code_created_at_id_idx"],
  ["response_code=5xx", T7, { responseCode: { class: 5 } }, "deliveries_tenant_response_5xx_idx"],
  ["response_code=2xx", UNSCOPED, { tenantId: "t7", responseCode: { class: 2 } }, "deliveries_tenant_response_2xx_idx"],
  ["response_code=4xx", T7, { responseCode: { class: 4 } }, "deliveries_tenant_response_4xx_idx"],
  ["event", T7, { eventType: "invoice.paid" }, "deliveries_tenant_created_at_id_idx"],
  ["since", T7, { since: new Date(Date.now() - 3_600_000) }, "deliveries_tenant_created_at_id_idx"],
  ["subscription_id", T7, { subscriptionId: SUB_OF_T7 }, "deliveries_subscription_id_created_at_id_idx"],
  [
    "subscription_id + tenant_id filter",
    UNSCOPED,
    { subscriptionId: SUB_OF_T7, tenantId: "t7" },
    "deliveries_subscription_id_created_at_id_idx",
  ],
  [
    "subscription_id + status",
    T7,
    { subscriptionId: SUB_OF_T7, status: "failed" },
    "deliveries_subscription_id_status_created_at_id_idx",
  ],
  [
    "subscription_id + 5xx",
    T7,
    { subscriptionId: SUB_OF_T7, responseCode: { class: 5 } },
    "deliveries_subscription_response_5xx_idx",
  ],
];

describe("per-tenant list plans", () => {
  it.each(deliveryCases)("deliveries, %s: walks its index in list order", async (label, scope, filters, index) => {
    const { custom, generic } = await plans(deliveryListQuery(scope, filters), { limit: 20 });
    expectIndexWalk(custom, index, `${label} (custom plan)`);
    expectIndexWalk(generic, index, `${label} (generic plan)`);
  });

  it("deliveries, a deep page of a tenant: walks the tenant index from the cursor", async () => {
    const { rows } = await client.query<{ id: string }>(
      "SELECT id FROM deliveries WHERE tenant_id = 't7' ORDER BY created_at DESC, id DESC OFFSET 900 LIMIT 1",
    );
    const { custom, generic } = await plans(deliveryListQuery(T7, {}), { limit: 20, startingAfter: rows[0]!.id });
    expectIndexWalk(custom, "deliveries_tenant_created_at_id_idx", "deep page (custom plan)");
    expectIndexWalk(generic, "deliveries_tenant_created_at_id_idx", "deep page (generic plan)");
  });

  it("deliveries, another tenant's subscription: the check on the subscription stops the walk before it reads a delivery", async () => {
    const { custom } = await plans(deliveryListQuery(T7, { subscriptionId: SUB_OF_T9 }), { limit: 20 });
    const walks = custom.filter((node) => node["Index Name"]?.startsWith("deliveries_"));
    expect(walks.length).toBeGreaterThan(0);
    expect(walks.every((node) => node["Actual Loops"] === 0)).toBe(true);
  });

  it("subscriptions of a tenant: walks the partial tenant index", async () => {
    for (const [scope, filters] of [
      [T7, {}],
      [UNSCOPED, { tenantId: "t7" }],
    ] as const) {
      const { custom, generic } = await plans(subscriptionListQuery(scope, filters), { limit: 20 });
      expectIndexWalk(custom, "subscriptions_tenant_created_at_id_idx", "subscriptions (custom plan)");
      expectIndexWalk(generic, "subscriptions_tenant_created_at_id_idx", "subscriptions (generic plan)");
    }
  });

  it("untenanted rows have no entry in any tenant index", async () => {
    // A build counts an index's entries exactly (pg_class.reltuples); VACUUM only estimates them.
    for (const index of [
      "deliveries_tenant_created_at_id_idx",
      "deliveries_tenant_status_created_at_id_idx",
      "subscriptions_tenant_created_at_id_idx",
    ]) {
      await client.query(`REINDEX INDEX ${index}`);
    }
    const { rows } = await client.query<{ indexname: string; entries: string }>(
      `SELECT c.relname AS indexname, c.reltuples::bigint::text AS entries FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
       WHERE c.relname LIKE '%tenant%' ORDER BY 1`,
    );
    const tenanted = await client.query<{ deliveries: string; subscriptions: string }>(
      "SELECT (SELECT count(*) FROM deliveries WHERE tenant_id IS NOT NULL)::text AS deliveries, (SELECT count(*) FROM subscriptions WHERE tenant_id IS NOT NULL)::text AS subscriptions",
    );
    const entries = new Map(rows.map((row) => [row.indexname, Number(row.entries)]));
    expect(entries.get("deliveries_tenant_created_at_id_idx")).toBe(Number(tenanted.rows[0]!.deliveries));
    expect(entries.get("deliveries_tenant_status_created_at_id_idx")).toBe(Number(tenanted.rows[0]!.deliveries));
    expect(entries.get("subscriptions_tenant_created_at_id_idx")).toBe(Number(tenanted.rows[0]!.subscriptions));
    expect(Number(tenanted.rows[0]!.deliveries)).toBe(DELIVERIES / 2);
  });
});
