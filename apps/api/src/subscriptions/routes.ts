import { createRoute } from "@hono/zod-openapi";
import { createSubscription, deleteSubscription, getSubscription, listSubscriptions, updateSubscription } from "@webhooks/db";
import { DEFAULT_PAGE_SIZE, jsonResponse, operationErrors } from "../http/schemas.ts";
import { newRouter, rawInput } from "../http/router.ts";
import type { ApiDeps } from "../http/types.ts";
import { validationError } from "../http/validation.ts";
import {
  createdSubscriptionSchema,
  createSubscriptionBody,
  deletedSubscriptionSchema,
  listSubscriptionsQuery,
  notUpdatableFields,
  subscriptionIdParam,
  subscriptionListSchema,
  subscriptionSchema,
  toSubscriptionJson,
  updateSubscriptionBody,
} from "./schemas.ts";

const tags = ["Subscriptions"];

const createRouteDef = createRoute({
  method: "post",
  path: "/v1/subscriptions",
  operationId: "createSubscription",
  tags,
  summary: "Create a subscription",
  description: "The response is the only one that ever contains the signing secret.",
  request: { body: { required: true, content: { "application/json": { schema: createSubscriptionBody } } } },
  responses: { 201: jsonResponse(createdSubscriptionSchema, "The subscription, with its signing secret"), ...operationErrors(413, 415) },
});

const getRouteDef = createRoute({
  method: "get",
  path: "/v1/subscriptions/{subscription_id}",
  operationId: "getSubscription",
  tags,
  summary: "Retrieve a subscription",
  description: "Its settings and its endpoint's health; never its secret. A deleted subscription is a 404.",
  request: { params: subscriptionIdParam },
  responses: { 200: jsonResponse(subscriptionSchema, "The subscription"), ...operationErrors(404) },
});

const listRouteDef = createRoute({
  method: "get",
  path: "/v1/subscriptions",
  operationId: "listSubscriptions",
  tags,
  summary: "List subscriptions",
  description: "Newest first, paged with starting_after / ending_before. Deleted subscriptions are not listed.",
  request: { query: listSubscriptionsQuery },
  responses: { 200: jsonResponse(subscriptionListSchema, "A page of subscriptions"), ...operationErrors() },
});

const updateRouteDef = createRoute({
  method: "put",
  path: "/v1/subscriptions/{subscription_id}",
  operationId: "updateSubscription",
  tags,
  summary: "Update a subscription",
  description:
    "Partial update: an omitted field keeps its value; `events` replaces the whole list. The change applies to " +
    "deliveries created after it; deliveries already created keep the settings they were created with. " +
    "`max_in_flight` and `rate_limit` apply to attempts that start after the change. `active: true` also re-enables a " +
    "subscription the service disabled and closes its circuit. `description`, `secret`, `health` and `disabled_reason` cannot be changed.",
  request: { params: subscriptionIdParam, body: { required: true, content: { "application/json": { schema: updateSubscriptionBody } } } },
  responses: { 200: jsonResponse(subscriptionSchema, "The updated subscription"), ...operationErrors(404, 413, 415) },
});

const deleteRouteDef = createRoute({
  method: "delete",
  path: "/v1/subscriptions/{subscription_id}",
  operationId: "deleteSubscription",
  tags,
  summary: "Delete a subscription",
  description: "Stops new deliveries. The delivery log stays listable; deliveries already created go out as planned.",
  request: { params: subscriptionIdParam },
  responses: { 200: jsonResponse(deletedSubscriptionSchema, "The subscription was deleted"), ...operationErrors(404) },
});

export function subscriptionRoutes(deps: ApiDeps) {
  const ctx = {
    db: deps.db,
    secretBox: deps.secretBox,
    destinationPolicy: deps.config.destinationPolicy,
    defaultMaxInFlight: deps.config.isolation.defaultMaxInFlight,
  };
  return newRouter()
    .openapi(createRouteDef, async (c) => {
      const { max_in_flight, rate_limit, ...body } = c.req.valid("json");
      const { subscription, secret } = await createSubscription(ctx, { ...body, maxInFlight: max_in_flight, rateLimit: rate_limit });
      return c.json({ ...toSubscriptionJson(subscription, new Date()), secret }, 201);
    })
    .openapi(getRouteDef, async (c) => {
      const subscription = await getSubscription(ctx, c.req.valid("param").subscription_id);
      return c.json(toSubscriptionJson(subscription, new Date()), 200);
    })
    .openapi(listRouteDef, async (c) => {
      const query = c.req.valid("query");
      const page = await listSubscriptions(ctx, {
        limit: query.limit ?? DEFAULT_PAGE_SIZE,
        startingAfter: query.starting_after,
        endingBefore: query.ending_before,
      });
      const now = new Date();
      const data = page.data.map((subscription) => toSubscriptionJson(subscription, now));
      return c.json({ object: "list" as const, url: "/v1/subscriptions", has_more: page.hasMore, data }, 200);
    })
    .openapi(
      updateRouteDef,
      async (c) => {
        const { max_in_flight, rate_limit, ...changes } = c.req.valid("json");
        const subscription = await updateSubscription(ctx, c.req.valid("param").subscription_id, {
          ...changes,
          maxInFlight: max_in_flight,
          rateLimit: rate_limit,
        });
        return c.json(toSubscriptionJson(subscription, new Date()), 200);
      },
      (result) => {
        if (!result.success) throw validationError(result.error, rawInput(result), { notUpdatable: notUpdatableFields });
        return undefined;
      },
    )
    .openapi(deleteRouteDef, async (c) => {
      const { subscription_id } = c.req.valid("param");
      await deleteSubscription(ctx, subscription_id);
      return c.json({ id: subscription_id, object: "subscription" as const, deleted: true as const }, 200);
    });
}
