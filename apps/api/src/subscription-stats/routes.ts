import { createRoute } from "@hono/zod-openapi";
import { getSubscriptionStats } from "@webhooks/db";
import { newRouter } from "../http/router.ts";
import { jsonResponse, operationErrors } from "../http/schemas.ts";
import type { ApiDeps } from "../http/types.ts";
import { subscriptionIdParam } from "../subscriptions/schemas.ts";
import { statsWindow, subscriptionStatsQuery, subscriptionStatsSchema, toSubscriptionStatsJson } from "./schemas.ts";

const statsRouteDef = createRoute({
  method: "get",
  path: "/v1/subscriptions/{subscription_id}/stats",
  operationId: "getSubscriptionStats",
  tags: ["Subscriptions"],
  summary: "Retrieve a subscription's delivery stats",
  description:
    "Counts of a time window (default the last 24 hours, at most 31 days): the deliveries created in it by their " +
    "status now, the attempts started in it by class (2xx to 5xx, timeout, network error), their latency " +
    "percentiles, and the deliveries delivered and failed per UTC hour (per day beyond 48 hours).",
  request: { query: subscriptionStatsQuery, params: subscriptionIdParam },
  responses: { 200: jsonResponse(subscriptionStatsSchema, "The subscription's stats"), ...operationErrors(404) },
});

export function subscriptionStatsRoutes(deps: ApiDeps) {
  return newRouter().openapi(statsRouteDef, async (c) => {
    const { since, until } = statsWindow(c.req.valid("query"), new Date());
    // The verb applies the caller's tenant scope (packages/db/src/tenant-scope.ts).
    const ctx = { db: deps.prisma, sql: deps.pool, scope: c.var.principal.scope };
    const stats = await getSubscriptionStats(ctx, {
      subscriptionId: c.req.valid("param").subscription_id,
      since,
      until,
    });
    return c.json(toSubscriptionStatsJson(stats), 200);
  });
}
