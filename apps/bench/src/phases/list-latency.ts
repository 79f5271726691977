import { type DeliveryFilters, deliveryListQuery, pageWithCursorCheck, UNSCOPED } from "@webhooks/db";
import { withClient } from "@webhooks/testing";
import type pg from "pg";
import { ApiClient } from "../api-client.ts";
import { type CpuUsage, postgresTarget, startCpuWindow } from "../cpu-usage.ts";
import { freshDatabase } from "../databases.ts";
import {
  cpuProfileArgs,
  mainProfileIn,
  type ProfileSummary,
  profileDirectory,
  summarizeProfile,
} from "../profiling/profile.ts";
import { startApi } from "../services.ts";
import { DATABASES, RUN_PREFIX, settings } from "../settings.ts";
import { type Summary, summarize } from "../stats.ts";
import { seedDeliveryLog } from "./list-seed.ts";

export interface ListCase {
  name: string;
  query: string;
  /** A reference request, not a list query: shows the machine's and the HTTP stack's own noise. */
  reference?: boolean;
  /** The SQL of the page query as packages/db builds it for this case (pageSql), with its parameters. */
  sql: string;
  params: unknown[];
}

export interface ListCaseResult {
  name: string;
  query: string;
  reference: boolean;
  latency: Summary;
  /** Rows on the last page returned, as a sanity check that the case selects something. */
  rows: number;
  plan: string;
  /** True when the plan reads the table by an index in list order (no Seq Scan, no Sort). */
  indexScan: boolean;
  executionMs: number;
}

export interface ListResult {
  deliveries: number;
  seedSeconds: number;
  cases: ListCaseResult[];
  /** The API process's CPU per list request during the measurement (from /proc), and PostgreSQL's. */
  apiCpuMsPerRequest: number;
  postgresCpuMsPerRequest: number;
  /** A CPU profile of the API serving the same requests, taken afterwards in a separate pass (with --profile). */
  apiProfile: ProfileSummary | undefined;
}

/**
 * Phase 3: GET /v1/deliveries through HTTP on a 1,000,000-row delivery log. A separate database is
 * seeded with SQL (list-seed.ts) and analyzed, an API process is started on it, and each case is
 * requested `requestsPerCase` times in sequence (one request in flight: this is the latency of a
 * request, not a throughput test), after a short warm-up that is not counted. EXPLAIN ANALYZE
 * then shows each case's plan and its execution time inside PostgreSQL. GET /healthz takes its
 * turn with the others as a reference: it touches neither PostgreSQL nor the API key check, so
 * its tail is the machine's and the HTTP stack's, not the delivery log's. With `profile`, the API is
 * then profiled serving the same requests, in a separate pass.
 */
export async function measureListLatency(options: { profile: boolean }): Promise<ListResult> {
  const databaseUrl = await freshDatabase(DATABASES.list);
  const seeded = await withClient(databaseUrl, seedDeliveryLog);
  console.log(`  seeded ${seeded.deliveries.toLocaleString("en-US")} deliveries in ${seeded.seconds.toFixed(1)} s`);
  const cases = await withClient(databaseUrl, buildCases);

  const api = await startApi(databaseUrl, `${RUN_PREFIX}-list`);
  const client = new ApiClient(api.baseUrl, 1);
  const results: ListCaseResult[] = [];
  let cpu: CpuUsage | undefined;
  try {
    // Warm-up, not counted: the first requests compile the route's code paths.
    await requestRounds(client, cases, 10);
    // The cases take turns, one request each, so that whatever else the machine is doing at a
    // given moment falls on all of them alike.
    const endCpuWindow = startCpuWindow([
      { label: "api", processGroup: api.processGroup },
      postgresTarget([DATABASES.list]),
    ]);
    const { samples, rows } = await requestRounds(client, cases, settings.list.requestsPerCase);
    cpu = endCpuWindow();
    for (const [index, c] of cases.entries()) {
      const plan = c.reference
        ? { plan: "-", indexScan: true, executionMs: Number.NaN }
        : await withClient(databaseUrl, (db) => explain(db, c));
      const result = {
        name: c.name,
        query: c.query,
        reference: c.reference ?? false,
        latency: summarize(samples[index]!),
        rows: rows[index]!,
        ...plan,
      };
      results.push(result);
      console.log(
        `  ${c.name.padEnd(32)} p50 ${result.latency.p50.toFixed(2)} ms, p99 ${result.latency.p99.toFixed(2)} ms` +
          (c.reference
            ? ""
            : `; ${result.rows} rows; ${plan.indexScan ? "index scan" : "NOT an index scan"}: ${plan.plan} (${plan.executionMs.toFixed(2)} ms in PostgreSQL)`),
      );
    }
  } finally {
    await client.close();
    await api.stop();
  }
  const requests = settings.list.requestsPerCase * cases.length;
  const apiProfile = options.profile ? await profileListRequests(databaseUrl, cases) : undefined;
  return {
    deliveries: seeded.deliveries,
    seedSeconds: seeded.seconds,
    cases: results,
    apiCpuMsPerRequest: ((cpu?.cores[0]?.cores ?? 0) * (cpu?.seconds ?? 0) * 1000) / requests,
    postgresCpuMsPerRequest: ((cpu?.cores[1]?.cores ?? 0) * (cpu?.seconds ?? 0) * 1000) / requests,
    apiProfile,
  };
}

async function requestRounds(
  client: ApiClient,
  cases: ListCase[],
  rounds: number,
): Promise<{ samples: number[][]; rows: number[] }> {
  const samples = cases.map(() => [] as number[]);
  const rows = cases.map(() => 0);
  for (let i = 0; i < rounds; i++) {
    for (const [index, c] of cases.entries()) {
      const started = performance.now();
      const reply = await client.request<{ data?: unknown[] }>("GET", c.query);
      samples[index]!.push(performance.now() - started);
      if (reply.status !== 200)
        throw new Error(`GET ${c.query} answered ${reply.status}: ${JSON.stringify(reply.body)}`);
      rows[index] = reply.body.data?.length ?? 0;
    }
  }
  return { samples, rows };
}

/** The same requests against an API started under --cpu-prof (a separate pass: profiling slows it). */
async function profileListRequests(databaseUrl: string, cases: ListCase[]): Promise<ProfileSummary | undefined> {
  const dir = profileDirectory();
  const api = await startApi(databaseUrl, `${RUN_PREFIX}-list-profile`, {}, cpuProfileArgs(dir));
  const client = new ApiClient(api.baseUrl, 1);
  let window: { fromUs: number; toUs: number } | undefined;
  try {
    await requestRounds(
      client,
      cases.filter((c) => !c.reference),
      10,
    );
    const fromUs = Number(process.hrtime.bigint() / 1000n);
    await requestRounds(
      client,
      cases.filter((c) => !c.reference),
      100,
    );
    window = { fromUs, toUs: Number(process.hrtime.bigint() / 1000n) };
  } finally {
    await client.close();
    await api.stop();
  }
  const profile = mainProfileIn(dir);
  return profile ? summarizeProfile(profile, window) : undefined;
}

/** The API's default page size (DEFAULT_PAGE_SIZE in apps/api/src/http/schemas.ts): the cases give no limit. */
const PAGE_SIZE = 20;

/**
 * The statement GET /v1/deliveries runs for these filters with the benchmark's unscoped key, as
 * packages/db builds it (the API does not expose its SQL, and EXPLAIN needs it).
 */
function pageSql(filters: DeliveryFilters, startingAfter?: string): { sql: string; params: unknown[] } {
  const statement = pageWithCursorCheck(deliveryListQuery(UNSCOPED, filters), { limit: PAGE_SIZE, startingAfter });
  // Dates as ISO text: explain() spells the values as SQL literals for the generic plan.
  return {
    sql: statement.text,
    params: statement.values.map((value) => (value instanceof Date ? value.toISOString() : value)),
  };
}

export async function buildCases(db: pg.Client): Promise<ListCase[]> {
  const one = async <T extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<T> => {
    const { rows } = await db.query<T>(sql, params);
    if (!rows[0]) throw new Error(`no row for ${sql}`);
    return rows[0];
  };
  const { id: subscription } = await one<{ id: string }>("SELECT id FROM subscriptions ORDER BY id LIMIT 1");
  const { since } = await one<{ since: Date }>("SELECT max(created_at) - interval '7 days' AS since FROM deliveries");
  const deep = settings.list.deepOffset;
  // Cursors ~900,000 rows deep in newest-first order: any row there, a failed one there, and one
  // of our subscription's there (each is what the previous page of that filtered list would end with).
  const { id: deepCursor } = await one<{ id: string }>(
    `SELECT id FROM deliveries ORDER BY created_at DESC, id DESC OFFSET ${deep} LIMIT 1`,
  );
  const { id: deepFailed } = await one<{ id: string }>(
    `SELECT id FROM (SELECT id, status, created_at FROM deliveries ORDER BY created_at DESC, id DESC OFFSET ${deep} LIMIT 100) AS d
     WHERE status = 'failed' ORDER BY created_at DESC, id DESC LIMIT 1`,
  );
  const { id: deepOfSubscription } = await one<{ id: string }>(
    `SELECT id FROM (SELECT id, subscription_id, created_at FROM deliveries ORDER BY created_at DESC, id DESC OFFSET ${deep} LIMIT 1000) AS d
     WHERE subscription_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1`,
    [subscription],
  );
  // Contract §13: one tenant's log (10% of the rows), as a tenant-scoped key or portal session
  // lists it; the SQL is the same with the tenant_id filter. With a subscription, the tenant is
  // checked once on the subscription and the walk is the subscription's.
  const { tenant, tenantSubscription } = await one<{ tenant: string; tenantSubscription: string }>(
    `SELECT tenant_id AS tenant, id AS "tenantSubscription" FROM subscriptions WHERE tenant_id IS NOT NULL ORDER BY tenant_id, id LIMIT 1`,
  );
  const { id: deepOfTenant } = await one<{ id: string }>(
    `SELECT id FROM deliveries WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC OFFSET ${Math.floor(deep / 10)} LIMIT 1`,
    [tenant],
  );
  const tenantCases: ListCase[] = [
    { name: "tenant_id", query: `/v1/deliveries?tenant_id=${tenant}`, ...pageSql({ tenantId: tenant }) },
    {
      name: "tenant_id + status=failed",
      query: `/v1/deliveries?tenant_id=${tenant}&status=failed`,
      ...pageSql({ tenantId: tenant, status: "failed" }),
    },
    {
      name: "tenant_id + response_code=5xx",
      query: `/v1/deliveries?tenant_id=${tenant}&response_code=5xx`,
      ...pageSql({ tenantId: tenant, responseCode: { class: 5 } }),
    },
    {
      name: "tenant_id + subscription_id",
      query: `/v1/deliveries?tenant_id=${tenant}&subscription_id=${tenantSubscription}`,
      ...pageSql({ tenantId: tenant, subscriptionId: tenantSubscription }),
    },
    {
      name: "deep page + tenant_id (~90,000 rows in)",
      query: `/v1/deliveries?tenant_id=${tenant}&starting_after=${deepOfTenant}`,
      ...pageSql({ tenantId: tenant }, deepOfTenant),
    },
  ];
  return [
    { name: "no filter", query: "/v1/deliveries", ...pageSql({}) },
    {
      name: "subscription_id",
      query: `/v1/deliveries?subscription_id=${subscription}`,
      ...pageSql({ subscriptionId: subscription }),
    },
    { name: "status=failed", query: "/v1/deliveries?status=failed", ...pageSql({ status: "failed" }) },
    {
      name: "subscription_id + status=failed",
      query: `/v1/deliveries?subscription_id=${subscription}&status=failed`,
      ...pageSql({ subscriptionId: subscription, status: "failed" }),
    },
    {
      name: "event=invoice.paid",
      query: "/v1/deliveries?event=invoice.paid",
      ...pageSql({ eventType: "invoice.paid" }),
    },
    {
      name: "since (7 days ago)",
      query: `/v1/deliveries?since=${encodeURIComponent(since.toISOString())}`,
      ...pageSql({ since }),
    },
    {
      name: "deep page (~900,000 rows in)",
      query: `/v1/deliveries?starting_after=${deepCursor}`,
      ...pageSql({}, deepCursor),
    },
    {
      name: "deep page + status=failed",
      query: `/v1/deliveries?status=failed&starting_after=${deepFailed}`,
      ...pageSql({ status: "failed" }, deepFailed),
    },
    {
      name: "deep page + subscription_id",
      query: `/v1/deliveries?subscription_id=${subscription}&starting_after=${deepOfSubscription}`,
      ...pageSql({ subscriptionId: subscription }, deepOfSubscription),
    },
    // Contract §12: an exact code walks (response_code, created_at, id); a class, its partial
    // index, whose predicate packages/db writes as literals.
    {
      name: "response_code=500",
      query: "/v1/deliveries?response_code=500",
      ...pageSql({ responseCode: { code: 500 } }),
    },
    {
      name: "response_code=5xx",
      query: "/v1/deliveries?response_code=5xx",
      ...pageSql({ responseCode: { class: 5 } }),
    },
    {
      name: "subscription_id + response_code=500",
      query: `/v1/deliveries?subscription_id=${subscription}&response_code=500`,
      ...pageSql({ subscriptionId: subscription, responseCode: { code: 500 } }),
    },
    {
      name: "subscription_id + response_code=5xx",
      query: `/v1/deliveries?subscription_id=${subscription}&response_code=5xx`,
      ...pageSql({ subscriptionId: subscription, responseCode: { class: 5 } }),
    },
    ...tenantCases,
    { name: "reference: GET /healthz", query: "/healthz", sql: "", params: [], reference: true },
  ];
}

interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  "Scan Direction"?: string;
  Plans?: PlanNode[];
}

interface Plan {
  summary: string;
  indexScan: boolean;
  executionMs: number;
}

/**
 * EXPLAIN ANALYZE of the case's page query, planned for its parameter values (a custom plan), and
 * again as a generic plan: packages/db names its statements, and PostgreSQL may switch a named
 * statement to its generic plan after five executions, so both must be index scans.
 */
async function explain(db: pg.Client, c: ListCase): Promise<{ plan: string; indexScan: boolean; executionMs: number }> {
  const custom = await planOf(db, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${c.sql}`, c.params);
  const values = c.params
    .map((value) => (typeof value === "number" ? String(value) : db.escapeLiteral(String(value))))
    .join(", ");
  await db.query(`PREPARE bench_case AS ${c.sql}`);
  let generic: Plan;
  try {
    await db.query("SET plan_cache_mode = force_generic_plan");
    generic = await planOf(db, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE bench_case(${values})`, []);
  } finally {
    await db.query("RESET plan_cache_mode");
    await db.query("DEALLOCATE bench_case");
  }
  return {
    plan: custom.summary === generic.summary ? custom.summary : `${custom.summary}; generic plan: ${generic.summary}`,
    indexScan: custom.indexScan && generic.indexScan,
    executionMs: custom.executionMs,
  };
}

/** The plan in one line, outermost node first. */
async function planOf(db: pg.Client, sql: string, params: unknown[]): Promise<Plan> {
  const { rows } = await db.query<{ "QUERY PLAN": [{ Plan: PlanNode; "Execution Time": number }] }>(sql, params);
  const root = rows[0]!["QUERY PLAN"][0];
  const nodes: string[] = [];
  let indexScan = true;
  const walk = (node: PlanNode) => {
    nodes.push(
      node["Index Name"]
        ? `${node["Node Type"]} ${node["Scan Direction"] === "Backward" ? "Backward " : ""}using ${node["Index Name"]}`
        : node["Node Type"],
    );
    if (/Seq Scan|Sort|Bitmap Heap Scan/.test(node["Node Type"])) indexScan = false;
    for (const child of node.Plans ?? []) walk(child);
  };
  walk(root.Plan);
  return { summary: nodes.join(" > "), indexScan, executionMs: root["Execution Time"] };
}
