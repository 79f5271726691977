import { type DeliveryFilters, deliveryListQuery, pageWithCursorCheck, UNSCOPED } from "@webhooks/db";
import { withClient } from "@webhooks/testing";
import type pg from "pg";
import { cpuMsPer } from "../harness/cpu.ts";
import { startStack } from "../harness/stack.ts";
import { latencies, ms, round, summarize } from "../harness/stats.ts";
import { atScale, check, definePhase, type Phase, type Scale, table } from "../phase.ts";
import { seedLog } from "./log-seed.ts";

const SETTINGS = {
  full: { deliveries: 1_000_000, rounds: 300 },
  quick: { deliveries: 100_000, rounds: 30 },
};
const TARGET_P99_MS = 10;

type Query = Partial<
  Record<"subscription_id" | "status" | "event" | "since" | "response_code" | "tenant_id" | "starting_after", string>
>;

/** A list request, and the statement packages/db runs for it (the API does not expose it, and EXPLAIN needs it). */
function listCase(name: string, query: Query) {
  const code = query.response_code;
  const filters: DeliveryFilters = {
    subscriptionId: query.subscription_id,
    status: query.status as DeliveryFilters["status"],
    eventType: query.event,
    since: query.since === undefined ? undefined : new Date(query.since),
    responseCode: code === undefined ? undefined : code.endsWith("xx") ? { class: 5 } : { code: Number(code) },
    tenantId: query.tenant_id,
  };
  // 20: the API's default page size, as the cases give no limit.
  const statement = pageWithCursorCheck(deliveryListQuery(UNSCOPED, filters), {
    limit: 20,
    startingAfter: query.starting_after,
  });
  // Dates as ISO text: explain() spells the values as SQL literals for the generic plan.
  const values = statement.values.map((value) => (value instanceof Date ? value.toISOString() : value));
  const search = new URLSearchParams(query as Record<string, string>).toString();
  return { name, path: `/v1/deliveries${search ? `?${search}` : ""}`, sql: [{ text: statement.text, values }] };
}

async function buildCases(db: pg.Client, deepOffset: number): Promise<LogCase[]> {
  const one = async (sql: string, params: unknown[] = []): Promise<string> => {
    const value = (await db.query<{ v: string | Date }>(sql, params)).rows[0]?.v;
    if (value === undefined) throw new Error(`no row for ${sql}`);
    return value instanceof Date ? value.toISOString() : value;
  };
  const newest = "ORDER BY created_at DESC, id DESC";
  const sub = await one("SELECT id AS v FROM subscriptions ORDER BY id LIMIT 1");
  const since = await one("SELECT max(created_at) - interval '7 days' AS v FROM deliveries");
  // Cursors ~90% deep in newest-first order: what the previous page of that list would end with.
  const deepAmong = (limit: number, where: string) =>
    `SELECT id AS v FROM (SELECT * FROM deliveries ${newest} OFFSET ${deepOffset} LIMIT ${limit}) d WHERE ${where} ${newest} LIMIT 1`;
  const deep = await one(deepAmong(1, "true"));
  const deepFailed = await one(deepAmong(100, "status = 'failed'"));
  const deepOfSub = await one(deepAmong(1000, "subscription_id = $1"), [sub]);
  // One tenant's log (10% of the rows), as a tenant-scoped key or a portal session lists it.
  const tenant = await one("SELECT tenant_id AS v FROM subscriptions WHERE tenant_id IS NOT NULL ORDER BY 1 LIMIT 1");
  const tenantSub = await one("SELECT id AS v FROM subscriptions WHERE tenant_id = $1 ORDER BY id LIMIT 1", [tenant]);
  const deepOfTenant = await one(
    `SELECT id AS v FROM deliveries WHERE tenant_id = $1 ${newest} OFFSET ${Math.floor(deepOffset / 10)} LIMIT 1`,
    [tenant],
  );
  return [
    listCase("no filter", {}),
    listCase("subscription_id", { subscription_id: sub }),
    listCase("status=failed", { status: "failed" }),
    listCase("subscription_id + status=failed", { subscription_id: sub, status: "failed" }),
    listCase("event=order.paid", { event: "order.paid" }),
    listCase("since (7 days ago)", { since }),
    listCase("deep page", { starting_after: deep }),
    listCase("deep page + status=failed", { status: "failed", starting_after: deepFailed }),
    listCase("deep page + subscription_id", { subscription_id: sub, starting_after: deepOfSub }),
    listCase("response_code=500", { response_code: "500" }),
    listCase("response_code=5xx", { response_code: "5xx" }),
    listCase("subscription_id + response_code=500", { subscription_id: sub, response_code: "500" }),
    listCase("subscription_id + response_code=5xx", { subscription_id: sub, response_code: "5xx" }),
    listCase("tenant_id", { tenant_id: tenant }),
    listCase("tenant_id + status=failed", { tenant_id: tenant, status: "failed" }),
    listCase("tenant_id + response_code=5xx", { tenant_id: tenant, response_code: "5xx" }),
    listCase("tenant_id + subscription_id", { tenant_id: tenant, subscription_id: tenantSub }),
    listCase("deep page + tenant_id", { tenant_id: tenant, starting_after: deepOfTenant }),
    // Neither PostgreSQL nor the key check: its tail is the machine's and the HTTP stack's.
    { name: "reference: GET /healthz", path: "/healthz", sql: [] },
  ];
}

type PlanNode = { "Node Type": string; "Index Name"?: string; "Scan Direction"?: string; Plans?: PlanNode[] };

/**
 * EXPLAIN ANALYZE with the values (a custom plan) and as a generic plan, which PostgreSQL may switch
 * packages/db's named statements to: both must read by an index in list order.
 */
async function explain(db: pg.Client, sql: { text: string; values: unknown[] }) {
  const planOf = async (statement: string, params: unknown[]) => {
    type Explained = { "QUERY PLAN": [{ Plan: PlanNode; "Execution Time": number }] };
    const root = (await db.query<Explained>(statement, params)).rows[0]!["QUERY PLAN"][0];
    const nodes: string[] = [];
    const walk = (node: PlanNode): void => {
      const backward = node["Scan Direction"] === "Backward" ? "Backward " : "";
      const index = node["Index Name"] ? ` ${backward}using ${node["Index Name"]}` : "";
      nodes.push(`${node["Node Type"]}${index}`);
      for (const child of node.Plans ?? []) walk(child);
    };
    walk(root.Plan);
    const text = nodes.join(" > ");
    return { text, indexScan: !/Seq Scan|Sort|Bitmap Heap Scan/.test(text), executionMs: root["Execution Time"] };
  };
  const custom = await planOf(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql.text}`, sql.values);
  const literals = sql.values.map((v) => (typeof v === "number" ? String(v) : db.escapeLiteral(String(v)))).join(", ");
  await db.query(`PREPARE bench_case AS ${sql.text}; SET plan_cache_mode = force_generic_plan`);
  const generic = await planOf(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE bench_case(${literals})`, []);
  await db.query("RESET plan_cache_mode; DEALLOCATE bench_case");
  const text = custom.text === generic.text ? custom.text : `${custom.text}; generic plan: ${generic.text}`;
  return { text, indexScan: custom.indexScan && generic.indexScan, executionMs: custom.executionMs };
}

/** A request of a phase on a seeded log, and the statements behind it (for their plans). */
export type LogCase = { name: string; path: string; sql: { text: string; values: unknown[] }[] };

/**
 * GET requests on a seeded log, one at a time, the cases taking turns so that whatever else the
 * machine does falls on all alike; then each case's plans. The first case is the target's.
 */
export function logPhase(
  spec: Pick<Phase, "name" | "title" | "summary"> & {
    settings: Record<Scale, { deliveries: number; rounds: number }>;
    seed: Omit<Parameters<typeof seedLog>[1], "deliveries">;
    cases: (db: pg.Client, deliveries: number) => Promise<LogCase[]>;
    /** What "rows" counts in a reply. */
    rows: (body: unknown) => number;
    target: { ms: number; figure: (deliveries: string) => string; worstCase: boolean };
  },
) {
  return definePhase({
    ...spec,
    async run(context) {
      const stack = await startStack(context, spec.name, { workers: 0, connections: 1 });
      try {
        const { url } = stack.database;
        const s = atScale(context.scale, spec.settings);
        const seeded = await withClient(url, (db) => seedLog(db, { deliveries: s.deliveries, ...spec.seed }));
        const cases = await withClient(url, (db) => spec.cases(db, seeded.deliveries));
        const [samples, rows] = [cases.map(() => [] as number[]), cases.map(() => 0)];
        let endCpu = stack.cpuWindow();
        // The first ten rounds compile the route's code paths, and are not counted.
        for (let round = -10; round < s.rounds; round++) {
          if (round === 0) endCpu = stack.cpuWindow();
          for (const [i, c] of cases.entries()) {
            const started = performance.now();
            const reply = await stack.client.request("GET", c.path, undefined, 200);
            if (round >= 0) samples[i]!.push(performance.now() - started);
            rows[i] = spec.rows(reply.body);
          }
        }
        const [cpu, requests] = [endCpu(), s.rounds * cases.length];
        const results = [];
        for (const [i, c] of cases.entries()) {
          const plans = [];
          for (const sql of c.sql) plans.push(await withClient(url, (db) => explain(db, sql)));
          results.push({ name: c.name, latency: summarize(samples[i]!), rows: rows[i]!, plans });
        }
        return {
          deliveries: seeded.deliveries,
          seedSeconds: seeded.seconds,
          cases: results,
          apiCpuMs: cpuMsPer(cpu, requests, ["api"]),
          postgresCpuMs: cpuMsPer(cpu, requests, ["postgres"]),
        };
      } finally {
        await stack.stop();
      }
    },
    report(r) {
      const planned = r.cases.filter((c) => c.plans.length > 0);
      const judged = spec.target.worstCase ? planned : planned.slice(0, 1);
      const worst = judged.reduce((a, b) => (b.latency.p99 > a.latency.p99 ? b : a));
      const title =
        `${round(r.deliveries)} deliveries (seeded in ${r.seedSeconds.toFixed(0)} s); ` +
        `ms of CPU per request: API ${r.apiCpuMs.toFixed(2)}, PostgreSQL ${r.postgresCpuMs.toFixed(2)}`;
      const rows = r.cases.map((c) => ({
        case: c.name,
        "p50 / p99 / max": latencies(c.latency),
        rows: c.plans.length ? String(c.rows) : "-",
        "in PostgreSQL": c.plans.length ? ms(c.plans.reduce((sum, p) => sum + p.executionMs, 0)) : "-",
        "index scan": !c.plans.length ? "-" : c.plans.every((p) => p.indexScan) ? "yes" : "**no**",
        plan: c.plans.map((p) => p.text).join("; then ") || "-",
      }));
      const figure = spec.target.figure(round(r.deliveries));
      const measured = `${ms(worst.latency.p99)} (${worst.name})`;
      const met = worst.latency.p99 <= spec.target.ms;
      return { tables: [table(title, rows)], checks: [check(figure, measured, `<= ${spec.target.ms} ms`, met)] };
    },
  });
}

export const listPhase = logPhase({
  name: "list",
  title: "GET /v1/deliveries on a large log",
  summary: "list latency per filter on 1,000,000 seeded deliveries, with each query's plan",
  settings: SETTINGS,
  seed: { queued: 5, retrying: 0 },
  cases: (db, deliveries) => buildCases(db, Math.floor(deliveries * 0.9)),
  rows: (body) => (body as { data?: unknown[] }).data?.length ?? 0,
  target: { ms: TARGET_P99_MS, figure: (n) => `GET /v1/deliveries p99 on ${n} rows (worst case)`, worstCase: true },
});
