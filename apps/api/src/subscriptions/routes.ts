import { createRoute } from "@hono/zod-openapi";
import { heldUntil, type Logger, parseDuration, withDeadline } from "@webhooks/core";
import {
  createSubscription,
  deleteSubscription,
  getDelivery,
  getSubscription,
  listSubscriptions,
  publishTestEvent,
  type RecoveredBatch,
  recoverDeliveries,
  rotateSubscriptionSecret,
  type SubscriptionRecord,
  type TenantScope,
  tenantForNewResource,
  updateSubscription,
} from "@webhooks/db";
import { type DeliveryQueue, gateLimits, type Wake } from "@webhooks/queue";
import { probeWithExplicitAction } from "../deliveries/explicit-probe.ts";
import { enqueueNextInLine, enqueueReleased } from "../deliveries/ordered-lines.ts";
import { deliverySchema, toDeliveryJson } from "../deliveries/schemas.ts";
import { ApiError } from "../http/api-error.ts";
import { newRouter, rawInput } from "../http/router.ts";
import { DEFAULT_PAGE_SIZE, isoTimestamp, jsonResponse, noQueryParameters, operationErrors } from "../http/schemas.ts";
import type { ApiDeps } from "../http/types.ts";
import { validationError } from "../http/validation.ts";
import {
  createdSubscriptionSchema,
  createSubscriptionBody,
  DEFAULT_OVERLAP,
  DEFAULT_TEST_EVENT,
  deletedSubscriptionSchema,
  listSubscriptionsQuery,
  notUpdatableFields,
  recoverBody,
  recoverySchema,
  rotateSecretBody,
  subscriptionIdParam,
  subscriptionListSchema,
  subscriptionSchema,
  testEventBody,
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
  description:
    "The response is the only one that ever contains the signing secret (hmac-sha256). An ed25519 subscription has no " +
    "secret to show: its public_key, on every read, verifies its signatures. auth.password, auth.client_secret and " +
    "client_certificate.private_key are write-only.",
  request: {
    query: noQueryParameters,
    body: { required: true, content: { "application/json": { schema: createSubscriptionBody } } },
  },
  responses: {
    201: jsonResponse(createdSubscriptionSchema, "The subscription, with its signing secret"),
    ...operationErrors(403, 413, 415),
  },
});

const getRouteDef = createRoute({
  method: "get",
  path: "/v1/subscriptions/{subscription_id}",
  operationId: "getSubscription",
  tags,
  summary: "Retrieve a subscription",
  description: "Its settings and its endpoint's health; never its secret. A deleted subscription is a 404.",
  request: { query: noQueryParameters, params: subscriptionIdParam },
  responses: { 200: jsonResponse(subscriptionSchema, "The subscription"), ...operationErrors(404) },
});

const listRouteDef = createRoute({
  method: "get",
  path: "/v1/subscriptions",
  operationId: "listSubscriptions",
  tags,
  summary: "List subscriptions",
  description:
    "Newest first, paged with starting_after / ending_before. Deleted subscriptions are not listed. " +
    "A tenant-scoped credential lists only its tenant's.",
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
    "`max_in_flight` and `rate_limit` apply to attempts that start after the change; `filter` to events published after " +
    "it. `active: true` also re-enables a subscription the service disabled and closes its circuit. `auth` and " +
    "`client_certificate` are replaced whole (their secrets sent again) or removed with null; deliveries already " +
    "created keep the credentials they were created with. `description`, `secret`, `health`, `disabled_reason`, " +
    "`tenant_id`, `signature_scheme` and `public_key` cannot be changed.",
  request: {
    query: noQueryParameters,
    params: subscriptionIdParam,
    body: { required: true, content: { "application/json": { schema: updateSubscriptionBody } } },
  },
  responses: { 200: jsonResponse(subscriptionSchema, "The updated subscription"), ...operationErrors(404, 413, 415) },
});

const deleteRouteDef = createRoute({
  method: "delete",
  path: "/v1/subscriptions/{subscription_id}",
  operationId: "deleteSubscription",
  tags,
  summary: "Delete a subscription",
  description: "Stops new deliveries. The delivery log stays listable; deliveries already created go out as planned.",
  request: { query: noQueryParameters, params: subscriptionIdParam },
  responses: { 200: jsonResponse(deletedSubscriptionSchema, "The subscription was deleted"), ...operationErrors(404) },
});

const rotateSecretRouteDef = createRoute({
  method: "post",
  path: "/v1/subscriptions/{subscription_id}/rotate_secret",
  operationId: "rotateSubscriptionSecret",
  tags,
  summary: "Rotate a subscription's signing secret",
  description:
    "Replaces the signing secret; the response is the only one that ever contains the new one. Until `overlap` " +
    "(default 24h) has passed, every attempt, of any delivery including those created before the rotation, carries " +
    "both signatures in webhook-signature (`v1,<new> v1,<old>`), so a receiver verifies with either secret; after it, " +
    "only the new one. Rotating again during an overlap ends the oldest secret's overlap at once. For an ed25519 " +
    "subscription the key pair is replaced: the response has no secret, and its public_key is the new one (`v1a,<new> " +
    "v1a,<old>` during the overlap).",
  request: {
    query: noQueryParameters,
    params: subscriptionIdParam,
    body: { required: false, content: { "application/json": { schema: rotateSecretBody } } },
  },
  responses: {
    200: jsonResponse(createdSubscriptionSchema, "The subscription, with its new signing secret"),
    ...operationErrors(404, 413, 415),
  },
});

const recoverRouteDef = createRoute({
  method: "post",
  path: "/v1/subscriptions/{subscription_id}/recover",
  operationId: "recoverSubscription",
  tags,
  summary: "Resend the failed deliveries of a time window",
  description:
    "Queues again every delivery of the subscription that is `failed` (for good, or waiting for a retry) and was " +
    "created in [since, until), each as a manual resend with the url and headers it was created with. The answer comes " +
    "once all of them are queued, with their exact count. Calling it again while one runs resends nothing twice.",
  request: {
    query: noQueryParameters,
    params: subscriptionIdParam,
    body: { required: true, content: { "application/json": { schema: recoverBody } } },
  },
  responses: {
    202: jsonResponse(recoverySchema, "The failed deliveries of the window are queued"),
    ...operationErrors(404, 413, 415),
  },
});

const testEventRouteDef = createRoute({
  method: "post",
  path: "/v1/subscriptions/{subscription_id}/test",
  operationId: "sendTestEvent",
  tags,
  summary: "Send a test event to a subscription",
  description:
    "Stores an example event (default type `webhook.test`) and one delivery of it to this subscription alone, whatever " +
    "its `events` and `filter`, and even while it is paused, and queues it. The event goes to no other subscription. " +
    "If its type has a schema in the event-type catalog, `data` must match it (422); EVENT_TYPES_STRICT does not apply.",
  request: {
    query: noQueryParameters,
    params: subscriptionIdParam,
    body: { required: false, content: { "application/json": { schema: testEventBody } } },
  },
  responses: {
    202: jsonResponse(deliverySchema, "The test delivery, queued"),
    ...operationErrors(404, 413, 415, 422),
  },
});

/**
 * Queues a recovered batch: one bulk add for the deliveries that had finished (their jobs are
 * gone), and the delayed job of each that was waiting for a retry promoted, 100 at a time.
 */
async function enqueueRecovered(queue: DeliveryQueue, batch: RecoveredBatch): Promise<void> {
  await queue.enqueue(batch.finished);
  for (let i = 0; i < batch.retrying.length; i += 100) {
    await Promise.all(batch.retrying.slice(i, i + 100).map((id) => queue.enqueueResend(id)));
  }
}

const RESUME_TIMEOUT_MS = 2_000;

/**
 * PUT `active: true` enables a subscription the service disabled, and closes its circuit (and
 * DELETE of a disabled one lets its deliveries go, as a deleted one's do): its deliveries waiting
 * at the workers' gate may go now. The gate forgets the disabled mark and the
 * hold it kept, and the head of the line is woken (the rest follow as it makes room). Answered
 * all the same if Redis fails: the mark lapses by itself within minutes and the line moves then.
 */
async function resumeLine(
  deps: Pick<ApiDeps, "gate" | "queue">,
  logger: Logger,
  subscriptionId: string,
): Promise<void> {
  await wakeLine(
    deps,
    logger,
    subscriptionId,
    deps.gate.resume(subscriptionId),
    "could not wake the deliveries waiting for a subscription enabled again; they go within minutes",
  );
}

/**
 * PUT changed `max_in_flight` or `rate_limit`: deliveries waiting at the gate for room go now if
 * the new limits have it, instead of when the subscription's next attempt ends. Answered all the
 * same if Redis fails: each attempt that ends wakes the line by the new limits anyway.
 */
async function resizeLine(
  deps: Pick<ApiDeps, "gate" | "queue" | "config">,
  logger: Logger,
  subscription: SubscriptionRecord,
): Promise<void> {
  // Held (a Retry-After, an open circuit): the line waits for the hold's end whatever the limits.
  // The gate's own record of the hold lasts at most a lease, so it is not asked.
  if (heldUntil(subscription, new Date()) !== null) return;
  await wakeLine(
    deps,
    logger,
    subscription.id,
    deps.gate.resize(gateLimits(subscription, deps.config.isolation)),
    "could not wake the deliveries waiting for room under new limits; they go as attempts end",
  );
}

/** Runs the gate's wakes for a subscription's line within RESUME_TIMEOUT_MS; a failure is logged, never the request's. */
async function wakeLine(
  deps: Pick<ApiDeps, "queue">,
  logger: Logger,
  subscriptionId: string,
  wakes: Promise<Wake[]>,
  failure: string,
): Promise<void> {
  try {
    await withDeadline(
      wakes.then((due) => deps.queue.wake(due)),
      RESUME_TIMEOUT_MS,
      "Redis",
    );
  } catch (error) {
    logger.warn({ err: error, subscriptionId }, failure);
  }
}

export function subscriptionRoutes(deps: ApiDeps) {
  const base = {
    db: deps.prisma,
    sql: deps.pool,
    secretBox: deps.secretBox,
    destinationPolicy: deps.config.destinationPolicy,
    defaultMaxInFlight: deps.config.isolation.defaultMaxInFlight,
    eventTypesStrict: deps.config.eventTypesStrict,
  };
  // Every verb below applies the caller's tenant scope itself (packages/db/src/tenant-scope.ts).
  const scoped = (c: { var: { principal: { scope: TenantScope } } }) => ({ ...base, scope: c.var.principal.scope });
  return newRouter()
    .openapi(createRouteDef, async (c) => {
      const { max_in_flight, rate_limit, tenant_id, signature_scheme, client_certificate, ...body } =
        c.req.valid("json");
      const tenantId = tenantForNewResource(c.var.principal.scope, tenant_id);
      const { subscription, secret } = await createSubscription(base, {
        ...body,
        maxInFlight: max_in_flight,
        rateLimit: rate_limit,
        tenantId,
        signatureScheme: signature_scheme,
        clientCertificate: client_certificate,
      });
      return c.json({ ...toSubscriptionJson(subscription, new Date()), ...(secret ? { secret } : {}) }, 201);
    })
    .openapi(getRouteDef, async (c) => {
      const subscription = await getSubscription(scoped(c), c.req.valid("param").subscription_id);
      return c.json(toSubscriptionJson(subscription, new Date()), 200);
    })
    .openapi(listRouteDef, async (c) => {
      const query = c.req.valid("query");
      const page = await listSubscriptions(
        scoped(c),
        { tenantId: query.tenant_id },
        {
          limit: query.limit ?? DEFAULT_PAGE_SIZE,
          startingAfter: query.starting_after,
          endingBefore: query.ending_before,
        },
      );
      const now = new Date();
      const data = page.data.map((subscription) => toSubscriptionJson(subscription, now));
      return c.json({ object: "list" as const, url: "/v1/subscriptions", has_more: page.hasMore, data }, 200);
    })
    .openapi(
      updateRouteDef,
      async (c) => {
        const { max_in_flight, rate_limit, client_certificate, ...changes } = c.req.valid("json");
        const { subscription, released } = await updateSubscription(scoped(c), c.req.valid("param").subscription_id, {
          ...changes,
          maxInFlight: max_in_flight,
          rateLimit: rate_limit,
          clientCertificate: client_certificate,
        });
        await enqueueReleased(deps, c.var.logger, subscription.id, released);
        if (changes.active === true) await resumeLine(deps, c.var.logger, subscription.id);
        if ((max_in_flight !== undefined || rate_limit !== undefined) && subscription.active)
          await resizeLine(deps, c.var.logger, subscription);
        return c.json(toSubscriptionJson(subscription, new Date()), 200);
      },
      (result) => {
        if (!result.success)
          throw validationError(result.error, rawInput(result), { notUpdatable: notUpdatableFields });
        return undefined;
      },
    )
    .openapi(rotateSecretRouteDef, async (c) => {
      const overlapMs = parseDuration(c.req.valid("json")?.overlap ?? DEFAULT_OVERLAP) ?? 0;
      const { subscription, secret } = await rotateSubscriptionSecret(scoped(c), c.req.valid("param").subscription_id, {
        overlapMs,
      });
      return c.json({ ...toSubscriptionJson(subscription, new Date()), ...(secret ? { secret } : {}) }, 200);
    })
    .openapi(recoverRouteDef, async (c) => {
      const { subscription_id } = c.req.valid("param");
      const { since, until } = c.req.valid("json");
      // The schema compares since with an until that was sent; the default one is now.
      if (until === undefined && since >= new Date()) {
        throw new ApiError(
          400,
          "invalid_request_error",
          "parameter_invalid",
          "since must be earlier than until, which is the time of the request when not sent",
          "since",
        );
      }
      const ctx = scoped(c);
      await getSubscription(ctx, subscription_id);
      // Answered once every batch is committed and enqueued, so the count is exact; one batch of
      // ids is held at a time. A batch that cannot be enqueued is queued in PostgreSQL all the
      // same: the reconciler enqueues it (or its retry's delayed job runs it at the retry time).
      const recovery = recoverDeliveries(ctx, { subscriptionId: subscription_id, since, until });
      let step = await recovery.next();
      // With the subscription's circuit open, the first delivery recovered goes now as the probe.
      const first = step.done ? undefined : [...step.value.finished, ...step.value.retrying][0];
      if (first !== undefined) await probeWithExplicitAction(deps, c.var.logger, subscription_id, first);
      while (!step.done) {
        try {
          await enqueueRecovered(deps.queue, step.value);
        } catch (error) {
          const deliveries = step.value.finished.length + step.value.retrying.length;
          c.var.logger.warn(
            { err: error, subscriptionId: subscription_id, deliveries },
            "could not enqueue recovered deliveries; the reconciler will",
          );
        }
        step = await recovery.next();
      }
      // Recovered deliveries left their line: the next of it may go.
      if (step.value.count > 0) await enqueueNextInLine(deps, c.var.logger, subscription_id);
      const body = {
        object: "recovery" as const,
        subscription_id,
        since: isoTimestamp(since),
        until: isoTimestamp(step.value.until),
        deliveries: step.value.count,
      };
      return c.json(body, 202);
    })
    .openapi(testEventRouteDef, async (c) => {
      const { subscription_id } = c.req.valid("param");
      const body = c.req.valid("json");
      // docs/api.md#tenant-scoped-api-keys: the one way a scoped credential sends an event, and
      // only to a subscription in its scope; the event and its delivery take the subscription's
      // tenant.
      const ctx = scoped(c);
      await getSubscription(ctx, subscription_id);
      const type = body?.type ?? DEFAULT_TEST_EVENT.type;
      const data = body?.data ?? DEFAULT_TEST_EVENT.data;
      await deps.catalog.checkTestEvent(type, data);
      const { deliveryId } = await publishTestEvent(
        { sql: deps.pool },
        { subscriptionId: subscription_id, type, data },
      );
      // Read before it is enqueued: the answer is the delivery as accepted (queued, no attempt
      // yet), not whatever a worker quick enough to claim it has made of it since.
      const accepted = await getDelivery(ctx, deliveryId);
      // With the subscription's circuit open, it goes now as the probe.
      await probeWithExplicitAction(deps, c.var.logger, subscription_id, deliveryId);
      try {
        await deps.queue.enqueue([deliveryId]);
      } catch (error) {
        c.var.logger.warn({ err: error, deliveryId }, "could not enqueue the test delivery; the reconciler will");
      }
      return c.json(toDeliveryJson(accepted), 202);
    })
    .openapi(deleteRouteDef, async (c) => {
      const { subscription_id } = c.req.valid("param");
      const { wasDisabled } = await deleteSubscription(scoped(c), subscription_id);
      // Its deliveries waiting for it to be enabled again go out now, as a deleted one's do.
      if (wasDisabled) await resumeLine(deps, c.var.logger, subscription_id);
      return c.json({ id: subscription_id, object: "subscription" as const, deleted: true as const }, 200);
    });
}
