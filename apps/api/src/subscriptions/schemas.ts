import { z } from "@hono/zod-openapi";
import { subscribedEventsSchema } from "@webhooks/core";
import type { SubscriptionRecord } from "@webhooks/db";
import { cursorQueries, isoTimestamp, limitQuery, listSchema, text } from "../http/schemas.ts";

const events = subscribedEventsSchema.meta({
  description: 'Event types to receive; "*" means every type. An update replaces the whole list.',
  example: ["invoice.paid", "invoice.payment_failed"],
});
const url = text(2048).openapi({ description: "HTTPS endpoint that receives deliveries.", example: "https://example.com/webhooks" });
const active = z.boolean().openapi({ description: "false pauses deliveries, true resumes them." });

export const subscriptionSchema = z
  .object({
    id: z.string().openapi({ example: "sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" }),
    object: z.literal("subscription"),
    url: z.string(),
    events: z.array(z.string()),
    description: z.string(),
    active: z.boolean(),
    created_at: z.string().openapi({ format: "date-time" }),
  })
  .openapi("Subscription");

export const createdSubscriptionSchema = subscriptionSchema
  .extend({
    secret: z.string().openapi({
      description: "The signing secret. Returned by this response only: store it now.",
      example: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    }),
  })
  .openapi("SubscriptionWithSecret");

export const deletedSubscriptionSchema = z
  .object({ id: z.string(), object: z.literal("subscription"), deleted: z.literal(true) })
  .openapi("DeletedSubscription");

export const subscriptionListSchema = listSchema(subscriptionSchema, "SubscriptionList", "/v1/subscriptions");

export const createSubscriptionBody = z
  .strictObject({
    url,
    events,
    description: text(1024).optional().openapi({ description: "Free text; cannot be changed by an update." }),
    active: active.optional().openapi({ default: true }),
  })
  .openapi("CreateSubscription");

/** Spec §4.2: only url, events and active can be updated, each optional. */
export const updateSubscriptionBody = z
  .strictObject({ url: url.optional(), events: events.optional(), active: active.optional() })
  .openapi("UpdateSubscription");

/** Sending these to PUT gets a message saying so, rather than "unknown parameter". */
export const notUpdatableFields = ["description", "secret"] as const;

export const subscriptionIdParam = z.object({
  subscription_id: z.string().openapi({ param: { name: "subscription_id", in: "path" }, example: "sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" }),
});

export const listSubscriptionsQuery = z.strictObject({ limit: limitQuery, ...cursorQueries });

export function toSubscriptionJson(subscription: SubscriptionRecord) {
  return {
    id: subscription.id,
    object: "subscription" as const,
    url: subscription.url,
    events: subscription.events,
    description: subscription.description,
    active: subscription.active,
    created_at: isoTimestamp(subscription.createdAt),
  };
}
