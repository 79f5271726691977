import { createRoute } from "@hono/zod-openapi";
import { getDelivery, listAttempts, listDeliveries, resendDelivery, type TenantScope } from "@webhooks/db";
import { newRouter } from "../http/router.ts";
import {
  DEFAULT_PAGE_SIZE,
  jsonResponse,
  noParametersBody,
  noQueryParameters,
  operationErrors,
} from "../http/schemas.ts";
import type { ApiDeps } from "../http/types.ts";
import { probeWithExplicitAction } from "./explicit-probe.ts";
import { enqueueNextInLine } from "./ordered-lines.ts";
import {
  attemptListSchema,
  deliveryIdParam,
  deliveryListSchema,
  deliverySchema,
  listAttemptsQuery,
  listDeliveriesQuery,
  toAttemptJson,
  toDeliveryJson,
} from "./schemas.ts";

const tags = ["Deliveries"];

const listRouteDef = createRoute({
  method: "get",
  path: "/v1/deliveries",
  operationId: "listDeliveries",
  tags,
  summary: "List deliveries (the delivery log)",
  description:
    "Newest first. Filters combine. Page with `starting_after` set to the last id of a page (older records) " +
    "or `ending_before` set to the first id (newer records). A tenant-scoped credential lists only its tenant's deliveries.",
  request: { query: listDeliveriesQuery },
  responses: { 200: jsonResponse(deliveryListSchema, "A page of deliveries"), ...operationErrors() },
});

const getRouteDef = createRoute({
  method: "get",
  path: "/v1/deliveries/{delivery_id}",
  operationId: "getDelivery",
  tags,
  summary: "Retrieve a delivery",
  description: "Its state, attempt count and last response code; its attempts are listed at /attempts.",
  request: { query: noQueryParameters, params: deliveryIdParam },
  responses: { 200: jsonResponse(deliverySchema, "The delivery"), ...operationErrors(404) },
});

const attemptsRouteDef = createRoute({
  method: "get",
  path: "/v1/deliveries/{delivery_id}/attempts",
  operationId: "listDeliveryAttempts",
  tags,
  summary: "List a delivery's attempts",
  description:
    "Newest first, paged like the delivery log. Each attempt shows the request headers it sent, with signatures and credentials elided.",
  request: { params: deliveryIdParam, query: listAttemptsQuery },
  responses: { 200: jsonResponse(attemptListSchema, "A page of attempts"), ...operationErrors(404) },
});

// The API names the route `retry`; in the code a manual one is a resend (delivery-resends.ts).
const resendRouteDef = createRoute({
  method: "post",
  path: "/v1/deliveries/{delivery_id}/retry",
  operationId: "retryDelivery",
  tags,
  summary: "Resend a delivery",
  description:
    "Queues the delivery for an attempt now, with the url and secret it was created with. Works on delivered and " +
    "failed deliveries (a scheduled retry is brought forward); on a queued one it changes nothing, and on one being " +
    "attempted at that moment neither: that attempt is its resend. A resend goes outside the order of a fifo " +
    "subscription: a delivery waiting in its line, queued or for a retry, leaves it and goes at once.",
  request: {
    query: noQueryParameters,
    params: deliveryIdParam,
    body: { required: false, content: { "application/json": { schema: noParametersBody } } },
  },
  responses: { 202: jsonResponse(deliverySchema, "The delivery, queued"), ...operationErrors(404, 413, 415) },
});

export function deliveryRoutes(deps: ApiDeps) {
  // Every verb below applies the caller's tenant scope itself (packages/db/src/tenant-scope.ts).
  const scoped = (c: { var: { principal: { scope: TenantScope } } }) => ({
    db: deps.prisma,
    sql: deps.pool,
    scope: c.var.principal.scope,
  });
  return newRouter()
    .openapi(listRouteDef, async (c) => {
      const query = c.req.valid("query");
      const page = await listDeliveries(
        scoped(c),
        {
          subscriptionId: query.subscription_id,
          status: query.status,
          eventType: query.event,
          since: query.since,
          until: query.until,
          responseCode: query.response_code,
          tenantId: query.tenant_id,
        },
        {
          limit: query.limit ?? DEFAULT_PAGE_SIZE,
          startingAfter: query.starting_after,
          endingBefore: query.ending_before,
        },
      );
      return c.json(
        { object: "list" as const, url: "/v1/deliveries", has_more: page.hasMore, data: page.data.map(toDeliveryJson) },
        200,
      );
    })
    .openapi(getRouteDef, async (c) => {
      return c.json(toDeliveryJson(await getDelivery(scoped(c), c.req.valid("param").delivery_id)), 200);
    })
    .openapi(attemptsRouteDef, async (c) => {
      const { delivery_id } = c.req.valid("param");
      const query = c.req.valid("query");
      const page = await listAttempts({ ...scoped(c), secretBox: deps.secretBox }, delivery_id, {
        limit: query.limit ?? DEFAULT_PAGE_SIZE,
        startingAfter: query.starting_after,
        endingBefore: query.ending_before,
      });
      return c.json(
        {
          object: "list" as const,
          url: `/v1/deliveries/${delivery_id}/attempts`,
          has_more: page.hasMore,
          data: page.data.map((attempt) => toAttemptJson(attempt, page.request)),
        },
        200,
      );
    })
    .openapi(resendRouteDef, async (c) => {
      const delivery = await resendDelivery(scoped(c), c.req.valid("param").delivery_id);
      // With the subscription's circuit open, it goes now as the probe.
      if (delivery.status === "queued")
        await probeWithExplicitAction(deps, c.var.logger, delivery.subscriptionId, delivery.id);
      try {
        // Also for a delivery that was already queued: if its job was lost, this puts it back.
        await deps.queue.enqueueResend(delivery.id);
      } catch (error) {
        c.var.logger.warn({ err: error, deliveryId: delivery.id }, "could not enqueue the resend; the reconciler will");
      }
      // A resend goes outside the order: a delivery it took out of its line lets the next go.
      await enqueueNextInLine(deps, c.var.logger, delivery.subscriptionId);
      return c.json(toDeliveryJson(delivery), 202);
    });
}
