import { createRoute } from "@hono/zod-openapi";
import { getEvent } from "@webhooks/db";
import { errorResponses, errorSchema, jsonResponse } from "../http/schemas.ts";
import { newRouter } from "../http/router.ts";
import type { ApiDeps } from "../http/types.ts";
import { createEventPublisher } from "./publisher.ts";
import { eventIdParam, eventSchema, idempotencyHeaders, publishEventBody, toEventJson } from "./schemas.ts";

const tags = ["Events"];

const publishRouteDef = createRoute({
  method: "post",
  path: "/v1/events",
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
    202: jsonResponse(eventSchema, "The event was accepted"),
    409: jsonResponse(errorSchema, "The Idempotency-Key was used before with a different request"),
    ...errorResponses,
  },
});

const getRouteDef = createRoute({
  method: "get",
  path: "/v1/events/{event_id}",
  tags,
  summary: "Retrieve an event",
  request: { params: eventIdParam },
  responses: { 200: jsonResponse(eventSchema, "The event"), ...errorResponses },
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
