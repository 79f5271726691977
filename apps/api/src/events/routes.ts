import { createRoute, z } from "@hono/zod-openapi";
import { getEvent } from "@webhooks/db";
import { jsonResponse, operationErrors } from "../http/schemas.ts";
import { newRouter } from "../http/router.ts";
import type { ApiDeps } from "../http/types.ts";
import { createEventPublisher } from "./publisher.ts";
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
    "then queues them. Once this returns 202 the event will be delivered, even if the queue was unreachable.",
  request: {
    headers: idempotencyHeaders,
    body: { required: true, content: { "application/json": { schema: publishEventBody } } },
  },
  responses: {
    202: jsonResponse(eventSchema, "The event was accepted", {
      "Idempotent-Replayed": z.literal("true").optional().openapi({
        description: "`true` when the Idempotency-Key was seen before and this is the event created then; absent otherwise.",
      }),
    }),
    ...operationErrors(409, 413, 415),
  },
});

const getRouteDef = createRoute({
  method: "get",
  path: "/v1/events/{event_id}",
  operationId: "getEvent",
  tags,
  summary: "Retrieve an event",
  description: "The event as it was published.",
  request: { params: eventIdParam },
  responses: { 200: jsonResponse(eventSchema, "The event"), ...operationErrors(404) },
});

export function eventRoutes(deps: ApiDeps) {
  const publisher = createEventPublisher({ sql: deps.sql, queue: deps.queue, logger: deps.logger });
  return newRouter()
    .openapi(publishRouteDef, async (c) => {
      const body = c.req.valid("json");
      const result = await publisher.publish({ type: body.type, data: body.data, idempotencyKey: c.req.valid("header")["Idempotency-Key"] });
      if (!result.created) c.header("Idempotent-Replayed", "true");
      return c.json(toEventJson(result.event), 202);
    })
    .openapi(getRouteDef, async (c) => {
      const event = await getEvent({ db: deps.db }, c.req.valid("param").event_id);
      return c.json(toEventJson(event), 200);
    });
}
