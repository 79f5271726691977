import { z } from "@hono/zod-openapi";
import {
  customHeadersProblem,
  deliveryOrderings,
  healthState,
  heldUntil,
  MAX_CUSTOM_HEADERS,
  MAX_CUSTOM_HEADERS_BYTES,
  MAX_FILTER_BYTES,
  MAX_FILTER_DEPTH,
  type PayloadFilter,
  parseDuration,
  payloadFilterProblem,
  subscribedEventsSchema,
} from "@webhooks/core";
import type { SubscriptionRecord } from "@webhooks/db";
import { publishEventBody } from "../events/schemas.ts";
import {
  cursorQueries,
  isJsonObject,
  isoTimestamp,
  limitQuery,
  listSchema,
  tenantIdField,
  tenantIdJson,
  tenantIdResponseField,
  text,
  timestampString,
} from "../http/schemas.ts";
import {
  authInput,
  authResponse,
  clientCertificateInput,
  clientCertificateResponse,
  publicKeyResponse,
  signatureScheme,
} from "./endpoint-auth-schemas.ts";

const events = subscribedEventsSchema.meta({
  description: 'Event types to receive; "*" means every type. An update replaces the whole list.',
  example: ["invoice.paid", "invoice.payment_failed"],
});
const url = text(2048).openapi({
  description: "HTTPS endpoint that receives deliveries.",
  example: "https://example.com/webhooks",
});
const active = z.boolean().openapi({
  description:
    "false pauses deliveries, true resumes them. true also re-enables a subscription the service disabled " +
    "(clearing disabled_reason) and closes its circuit.",
});

const integerBetween = (name: string, min: number, max: number) => {
  const message = `${name} must be an integer between ${min} and ${max}`;
  return z.number({ error: message }).int(message).min(min, message).max(max, message);
};

// docs/api.md#endpoint-limits. Out-of-range values are refused, never clamped.
const maxInFlightDescription =
  "At most this many attempts to this subscription in flight at once, across every worker, 1 to 1000. " +
  "A change applies to attempts that start after it.";
const maxInFlight = integerBetween("max_in_flight", 1, 1000).openapi({
  description: maxInFlightDescription,
  example: 10,
});
const rateLimitDescription =
  "At most this many attempts per second to this subscription, across every worker, 1 to 10000; null for no limit. " +
  "A change applies to attempts that start after it.";
const rateLimit = integerBetween("rate_limit", 1, 10_000)
  .nullable()
  .openapi({ description: rateLimitDescription, example: 50 });

const headersDescription =
  `Extra HTTP headers sent with every delivery: up to ${MAX_CUSTOM_HEADERS}, names are RFC 9110 tokens (case-insensitive), ` +
  `values printable ASCII, ${MAX_CUSTOM_HEADERS_BYTES} bytes in all. content-type, content-length, host, user-agent, connection, ` +
  "transfer-encoding, keep-alive, upgrade, expect, te, trailer, proxy-connection and webhook-* cannot be set. Each delivery keeps the " +
  "headers the subscription had when it was created.";

// docs/api.md#custom-headers. z.custom keeps the object as sent (z.record would drop a "__proto__"
// key), and each problem is reported at `headers.<Name>`, so the 400 names the header.
const customHeaders = z
  .custom<Record<string, string>>(isJsonObject, { error: "headers must be a JSON object of header names to values" })
  .superRefine((headers, ctx) => {
    const problem = customHeadersProblem(headers);
    if (problem) {
      ctx.addIssue({
        code: "custom",
        message: problem.header === undefined ? problem.message : `headers.${problem.header} ${problem.message}`,
        path: problem.header === undefined ? [] : [problem.header],
      });
    }
  })
  .openapi({
    type: "object",
    additionalProperties: { type: "string" },
    maxProperties: MAX_CUSTOM_HEADERS,
    description: headersDescription,
    example: { Authorization: "Bearer 3c1f0e", "X-Tenant": "acme" },
  });

const filterDescription =
  "Delivers only the events that match it, besides `events`: an object matched against " +
  '`{"type": <event type>, "data": <event data>}`, or null for none. A key is a field name (nested objects nest); a ' +
  "plain value means equality (an array, equality of the whole array); an operator object holds any of $eq, $neq, " +
  "$gt, $gte, $lt, $lte (numbers, or ISO 8601 date-times compared as instants), $in, $nin (arrays), $exists " +
  "(boolean), $startsWith (string); $and, $or (arrays of filters) and $not (a filter) combine. A missing field " +
  `matches only $exists: false, $neq and $nin. At most ${MAX_FILTER_BYTES} bytes of JSON, ${MAX_FILTER_DEPTH} levels deep. ` +
  "A change applies to events published after it.";

// z.custom keeps the object as sent (a key named "__proto__" too); the 400 names the place in it.
const filter = z
  .custom<PayloadFilter>(isJsonObject, { error: "filter must be a JSON object, or null for none" })
  .superRefine((value, ctx) => {
    const problem = payloadFilterProblem(value);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  })
  .openapi({ type: "object", additionalProperties: true })
  .nullable()
  .openapi({
    type: ["object", "null"],
    description: filterDescription,
    example: { data: { amount: { $gte: 1000 }, currency: { $in: ["usd", "eur"] } } },
  });

// docs/api.md#ordered-delivery
const orderingDescription =
  '"none": deliveries go as soon as the limits allow. "fifo": one at a time, across every worker, in the order ' +
  "of their events' publication (created_at, then id); a delivery is attempted only once every earlier one is " +
  "delivered or failed for good, so one waiting for a retry holds the ones after it. A resend, a recover and a test " +
  'event go at once, outside the order. A switch to "fifo" applies to deliveries created after it; a switch to ' +
  '"none" releases the waiting ones at once.';
const ordering = z
  .enum(deliveryOrderings, { error: 'ordering must be "none" or "fifo"' })
  .openapi({ description: orderingDescription, example: "fifo" });

const nullableTimestamp = (description: string) => z.string().nullable().openapi({ format: "date-time", description });

const healthSchema = z
  .object({
    state: z.enum(["healthy", "failing", "circuit_open"]).openapi({
      description:
        "healthy: the last attempts succeeded (or none was made); failing: attempts have failed since the last success; " +
        "circuit_open: attempts are held until retry_at, after repeated failures or a Retry-After from the endpoint.",
    }),
    consecutive_failures: z
      .number()
      .int()
      .openapi({ description: "Timeouts, connection errors and 5xx responses in a row; a success resets it." }),
    last_success_at: nullableTimestamp("When an attempt last succeeded, or null."),
    last_failure_at: nullableTimestamp("When an attempt last failed, or null."),
    retry_at: nullableTimestamp(
      "While attempts are held: when they may start again (the next probe of an open circuit, or the end of a Retry-After). Otherwise null.",
    ),
  })
  .openapi("SubscriptionHealth", { description: "The endpoint's health, kept by the service. Read-only." });

export const subscriptionSchema = z
  .object({
    id: z.string().openapi({ example: "sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" }),
    object: z.literal("subscription"),
    url: z.string(),
    events: z.array(z.string()),
    description: z.string(),
    active: z.boolean(),
    created_at: z.string().openapi({ format: "date-time" }),
    max_in_flight: z
      .number()
      .int()
      .openapi({ description: "At most this many attempts in flight at once, across every worker." }),
    rate_limit: z
      .number()
      .int()
      .nullable()
      .openapi({ description: "At most this many attempts per second, or null for no limit." }),
    headers: z
      .record(z.string(), z.string())
      .openapi({ description: "Extra HTTP headers sent with every delivery created from now on." }),
    signature_scheme: signatureScheme,
    ordering: ordering.openapi({ description: 'The order its deliveries go in: "none" or "fifo".' }),
    public_key: publicKeyResponse,
    auth: authResponse,
    client_certificate: clientCertificateResponse,
    health: healthSchema,
    tenant_id: tenantIdResponseField,
    filter: z
      .custom<PayloadFilter>(isJsonObject)
      .openapi({ type: "object", additionalProperties: true })
      .nullable()
      .openapi({
        type: ["object", "null"],
        description: "The payload filter: only events that match it are delivered. null for none.",
      }),
    disabled_reason: z
      .enum(["failing", "gone"])
      .nullable()
      .openapi({
        description:
          "Why the service disabled the subscription (active is then false): failing, no successful attempt for AUTO_DISABLE_AFTER " +
          "while attempts failed; gone, the endpoint answered 410. null if it did not. PUT active:true clears it. Read-only.",
      }),
  })
  .openapi("Subscription");

export const createdSubscriptionSchema = subscriptionSchema
  .extend({
    secret: z
      .string()
      .optional()
      .openapi({
        description:
          "The hmac-sha256 signing secret. Returned by this response only: store it now. Absent for ed25519, whose " +
          "private key is never shown (verify with public_key).",
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
    max_in_flight: maxInFlight.optional().openapi({
      description: `${maxInFlightDescription} Default: the deployment's DEFAULT_MAX_IN_FLIGHT (25 unless configured otherwise).`,
    }),
    rate_limit: rateLimit.optional().openapi({ default: null }),
    headers: customHeaders.optional().openapi({ default: {} }),
    filter: filter.optional().openapi({ default: null }),
    tenant_id: tenantIdField(
      "The tenant (your customer) the subscription belongs to: it receives only events published with this tenant_id. " +
        "Cannot be changed. A tenant-scoped credential creates for its own tenant, whether or not it sends this.",
    ).optional(),
    signature_scheme: signatureScheme.optional().openapi({ default: "hmac-sha256" }),
    ordering: ordering.optional().openapi({ default: "none" }),
    auth: authInput.optional().openapi({ default: null }),
    client_certificate: clientCertificateInput.optional().openapi({ default: null }),
  })
  .openapi("CreateSubscription");

/** docs/api.md#update-a-subscription: each field optional. */
export const updateSubscriptionBody = z
  .strictObject({
    url: url.optional(),
    events: events.optional(),
    active: active.optional(),
    max_in_flight: maxInFlight.optional(),
    rate_limit: rateLimit.optional().openapi({ description: `${rateLimitDescription} Send null to remove the limit.` }),
    headers: customHeaders
      .optional()
      .openapi({ description: `${headersDescription} An update replaces the whole set; {} removes them.` }),
    filter: filter.optional().openapi({ description: `${filterDescription} Send null to remove it.` }),
    auth: authInput.optional().openapi({ description: "Replaces the endpoint authentication; null removes it." }),
    client_certificate: clientCertificateInput
      .optional()
      .openapi({ description: "Replaces the client certificate; null removes it." }),
    ordering: ordering.optional(),
  })
  .openapi("UpdateSubscription");

const MAX_OVERLAP_MS = 7 * 86_400_000;
const overlapMessage = "overlap must be a duration from 0s to 7d, such as 24h, 30m or 0s";

/** docs/api.md#rotate-the-signing-secret: how long the replaced secret keeps signing, `0s` to `7d`. */
export const rotateSecretBody = z
  .strictObject({
    overlap: z
      .string({ error: overlapMessage })
      .refine((text) => {
        const ms = parseDuration(text);
        return ms !== undefined && ms <= MAX_OVERLAP_MS;
      }, overlapMessage)
      .optional()
      .openapi({
        default: "24h",
        description:
          "How long the replaced secret stays valid: until then every attempt, of any delivery, carries both signatures " +
          "(`v1,<new> v1,<old>`); after it, only the new one. A duration from `0s` to `7d` (`ms`, `s`, `m`, `h` or `d`).",
        example: "24h",
      }),
  })
  .openapi("RotateSubscriptionSecret");

export const DEFAULT_OVERLAP = "24h";

export const recoverBody = z
  .strictObject({
    since: timestampString("since").openapi({
      type: "string",
      format: "date-time",
      description: "Resend failed deliveries created at or after this time.",
    }),
    until: timestampString("until").optional().openapi({
      type: "string",
      format: "date-time",
      description: "Resend failed deliveries created before this time (exclusive). Default: the time of the request.",
    }),
  })
  .refine((body) => body.until === undefined || body.until > body.since, {
    error: "until must be later than since",
    path: ["until"],
  })
  .openapi("RecoverSubscription");

export const recoverySchema = z
  .object({
    object: z.literal("recovery"),
    subscription_id: z.string(),
    since: z.string().openapi({ format: "date-time" }),
    until: z.string().openapi({
      format: "date-time",
      description: "The end of the window: the one sent, or the time of the request.",
    }),
    deliveries: z.number().int().openapi({ description: "How many failed deliveries were queued again." }),
  })
  .openapi("Recovery");

export const DEFAULT_TEST_EVENT = {
  type: "webhook.test",
  data: { message: "This is a test event sent from the webhook service." },
};

/** docs/api.md#send-a-test-event: the rules of POST /v1/events for `type` and `data`, both optional here. */
export const testEventBody = z
  .strictObject({
    type: publishEventBody.shape.type.optional().openapi({
      default: DEFAULT_TEST_EVENT.type,
      description: "The event type; the rules of POST /v1/events apply.",
    }),
    data: publishEventBody.shape.data
      .optional()
      .openapi({ default: DEFAULT_TEST_EVENT.data, description: "The event's payload: any JSON object." }),
  })
  .openapi("SendTestEvent");

/** Sending these to PUT gets a message saying so, rather than "unknown parameter". */
export const notUpdatableFields = [
  "description",
  "secret",
  "health",
  "disabled_reason",
  "tenant_id",
  "signature_scheme",
  "public_key",
] as const;

export const subscriptionIdParam = z.object({
  subscription_id: z
    .string()
    .openapi({ param: { name: "subscription_id", in: "path" }, example: "sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" }),
});

export const listSubscriptionsQuery = z.strictObject({
  tenant_id: tenantIdField("Only this tenant's subscriptions.").optional(),
  limit: limitQuery,
  ...cursorQueries,
});

const isoOrNull = (date: Date | null): string | null => (date === null ? null : isoTimestamp(date));

/** `now` is the time of the request: whether a hold is still on depends on it. */
export function toSubscriptionJson(subscription: SubscriptionRecord, now: Date) {
  const retryAt = heldUntil(subscription, now);
  return {
    id: subscription.id,
    object: "subscription" as const,
    url: subscription.url,
    events: subscription.events,
    description: subscription.description,
    active: subscription.active,
    created_at: isoTimestamp(subscription.createdAt),
    max_in_flight: subscription.maxInFlight,
    rate_limit: subscription.rateLimit,
    headers: subscription.headers,
    signature_scheme: subscription.signatureScheme,
    ordering: subscription.ordering,
    public_key: subscription.publicKey,
    auth: subscription.auth,
    client_certificate: subscription.clientCertificate,
    ...tenantIdJson(subscription.tenantId),
    filter: subscription.filter,
    health: {
      state: healthState(subscription, now),
      consecutive_failures: subscription.consecutiveFailures,
      last_success_at: isoOrNull(subscription.lastSuccessAt),
      last_failure_at: isoOrNull(subscription.lastFailureAt),
      retry_at: isoOrNull(retryAt),
    },
    disabled_reason: subscription.disabledReason,
  };
}

// The routes' request and response types (requests as a client sends them, before defaults),
// for the tests and any TypeScript caller that would rather not repeat them.
export type CreateSubscriptionRequest = z.input<typeof createSubscriptionBody>;
export type UpdateSubscriptionRequest = z.input<typeof updateSubscriptionBody>;
export type RotateSecretRequest = z.input<typeof rotateSecretBody>;
export type RecoverSubscriptionRequest = z.input<typeof recoverBody>;
export type SendTestEventRequest = z.input<typeof testEventBody>;
export type SubscriptionResponse = z.output<typeof subscriptionSchema>;
export type CreatedSubscriptionResponse = z.output<typeof createdSubscriptionSchema>;
export type DeletedSubscriptionResponse = z.output<typeof deletedSubscriptionSchema>;
export type SubscriptionListResponse = z.output<typeof subscriptionListSchema>;
export type RecoveryResponse = z.output<typeof recoverySchema>;
