import { createRoute, z } from "@hono/zod-openapi";
import { eraseEventPayload, getEventInScope, requireUnscoped } from "@webhooks/db";
import { newRouter } from "../http/router.ts";
import { jsonResponse, noQueryParameters, operationErrors } from "../http/schemas.ts";
import type { ApiDeps } from "../http/types.ts";
import { eventIdParam, eventSchema, idempotencyHeaders, publishEventBody, toEventJson } from "./schemas.ts";

const tags = ["Events"];

const publishRouteDef = createRoute({
  method: "post",
  path: "/v1/events",
  operationId: "publishEvent",
  tags,
  summary: "Publish an event",
  description:
    "Stores the event and creates one delivery for each active subscription whose `events` match its type, " +
    "then queues them. Once this returns 202 the event will be delivered, even if the queue was unreachable. " +
    "With `tenant_id` it reaches only that tenant's subscriptions; without, only subscriptions of no tenant. A " +
    "subscription with a `filter` gets the event only if the filter matches it. If the type is in the event-type " +
    "catalog with a schema, `data` must match it (422 payload_invalid otherwise, and nothing is stored). With " +
    "EVENT_TYPES_STRICT, a type not in the catalog, or archived, is a 400 unknown_event_type. " +
    "A tenant-scoped credential cannot publish (403); it sends test events with POST /v1/subscriptions/{id}/test.",
  request: {
    query: noQueryParameters,
    headers: idempotencyHeaders,
    body: { required: true, content: { "application/json": { schema: publishEventBody } } },
  },
  responses: {
    202: jsonResponse(eventSchema, "The event was accepted", {
      "Idempotent-Replayed": z.literal("true").optional().openapi({
        description:
          "`true` when the Idempotency-Key was seen before and this is the event created then; absent otherwise.",
      }),
    }),
    ...operationErrors(403, 409, 413, 415, 422),
  },
});

const getRouteDef = createRoute({
  method: "get",
  path: "/v1/events/{event_id}",
  operationId: "getEvent",
  tags,
  summary: "Retrieve an event",
  description: "The event as it was published.",
  request: { query: noQueryParameters, params: eventIdParam },
  responses: { 200: jsonResponse(eventSchema, "The event"), ...operationErrors(404) },
});

const erasePayloadRouteDef = createRoute({
  method: "delete",
  path: "/v1/events/{event_id}/payload",
  operationId: "deleteEventPayload",
  tags,
  summary: "Erase an event's payload",
  description:
    "Erases the event's `data` for good; the event, its deliveries and their attempts keep their metadata until " +
    "RETENTION. Deliveries of it still to be sent end `failed` with `failure_reason` `payload_deleted`, and " +
    "resending one is a 409 payload_deleted. Erasing again changes nothing and answers the event as it is. " +
    "A tenant-scoped credential erases only its tenant's events.",
  request: { query: noQueryParameters, params: eventIdParam },
  responses: {
    200: jsonResponse(eventSchema, "The event, with `data` null and `payload_deleted_at` set"),
    ...operationErrors(404),
  },
});

export function eventRoutes(deps: ApiDeps) {
  const { publisher } = deps;
  return newRouter()
    .openapi(publishRouteDef, async (c) => {
      // docs/api.md#tenant-scoped-api-keys: a tenant-scoped credential sends events only through a
      // subscription's /test.
      requireUnscoped(c.var.principal.scope, "publish events");
      const body = c.req.valid("json");
      const result = await publisher.publish({
        type: body.type,
        data: body.data,
        tenantId: body.tenant_id ?? null,
        idempotencyKey: c.req.valid("header")["Idempotency-Key"],
        traceparent: c.var.traceparent,
      });
      c.var.span?.setAttribute("webhook.event_id", result.event.id);
      if (!result.created) c.header("Idempotent-Replayed", "true");
      return c.json(toEventJson(result.event), 202);
    })
    .openapi(getRouteDef, async (c) => {
      const event = await getEventInScope(
        { db: deps.prisma, scope: c.var.principal.scope },
        c.req.valid("param").event_id,
      );
      return c.json(toEventJson(event), 200);
    })
    .openapi(erasePayloadRouteDef, async (c) => {
      const { event, endedDeliveries } = await eraseEventPayload(
        { sql: deps.pool, scope: c.var.principal.scope },
        c.req.valid("param").event_id,
      );
      if (endedDeliveries > 0) c.var.logger.info({ eventId: event.id, endedDeliveries }, "payload erased");
      return c.json(toEventJson(event), 200);
    });
}
