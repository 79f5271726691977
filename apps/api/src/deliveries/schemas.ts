import { z } from "@hono/zod-openapi";
import { attemptRequestHeaders, deliveryStatuses } from "@webhooks/core";
import type { AttemptRecord, DeliveryRecord, DeliveryRequest, ResponseClass, ResponseCodeFilter } from "@webhooks/db";
import {
  cursorQueries,
  isoTimestamp,
  limitQuery,
  listSchema,
  tenantIdField,
  tenantIdJson,
  tenantIdResponseField,
  text,
  timestampQuery,
} from "../http/schemas.ts";

export const deliverySchema = z
  .object({
    id: z.string().openapi({ example: "dlv_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" }),
    object: z.literal("delivery"),
    subscription_id: z.string(),
    event_id: z.string(),
    event: z.string().openapi({ description: "The event type.", example: "invoice.paid" }),
    status: z.enum(deliveryStatuses),
    attempts: z.number().int().openapi({ description: "Attempts made so far." }),
    response_code: z.number().int().nullable().openapi({
      description: "Status of the last response; null before any response, and after a timeout or network error.",
    }),
    next_retry_at: z
      .string()
      .nullable()
      .openapi({ format: "date-time", description: "When the next retry is scheduled; null when none is." }),
    tenant_id: tenantIdResponseField,
    failure_reason: z
      .enum(["payload_deleted"])
      .optional()
      .openapi({
        description:
          "Why the delivery ended without being sent: `payload_deleted` when its event's payload was erased while " +
          "it was still to be sent. Absent otherwise.",
      }),
    created_at: z.string().openapi({ format: "date-time" }),
  })
  .openapi("Delivery");

export const attemptSchema = z
  .object({
    id: z.string().openapi({ example: "att_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" }),
    object: z.literal("delivery_attempt"),
    delivery_id: z.string(),
    number: z.number().int().openapi({ description: "1 for the delivery's first attempt." }),
    url: z
      .string()
      .openapi({ description: "Where this attempt was sent: the delivery's snapshot of the subscription's url." }),
    started_at: z.string().openapi({ format: "date-time" }),
    duration_ms: z.number().int().nullable().openapi({
      description:
        "How long the attempt took, in milliseconds; null while it is in flight, and when its outcome is unknown (see error).",
    }),
    response_code: z.number().int().nullable(),
    response_body: z.string().nullable().openapi({ description: "The first 4 KiB of the response body." }),
    error: z.string().nullable().openapi({
      description:
        'Why no response was received (timeout, connection refused, ...); with a response, why its body did not arrive in full ("response body incomplete: ..."); or null.',
    }),
    request_headers: z.record(z.string(), z.string()).openapi({
      description:
        "The request headers this attempt sent, in the order sent, with nothing secret in them: webhook-signature " +
        'is shown as its scheme alone ("v1,…", or "v1a,…" for ed25519, whether one or, during a rotation\'s overlap, ' +
        "two signatures were sent); the authorization header the subscription's auth adds as its scheme alone " +
        '("Basic …", "Bearer …"); and the value of a custom header whose name says it holds a credential (Cookie, ' +
        'or a name with auth, token, secret, key, password, session, ... in it) as "…", or its scheme and "…". ' +
        "webhook-timestamp is started_at in Unix seconds: an attempt is signed with its start.",
      example: {
        "content-type": "application/json",
        "user-agent": "webhook-delivery-service/1.0",
        "X-Region": "eu",
        "X-Api-Key": "…",
        "webhook-id": "evt_01JD5V6Y7Z8X9W0V1U2T3S4R5Q",
        "webhook-timestamp": "1795820210",
        "webhook-signature": "v1,…",
        authorization: "Bearer …",
      },
    }),
  })
  .openapi("DeliveryAttempt");

export const deliveryListSchema = listSchema(deliverySchema, "DeliveryList", "/v1/deliveries");
export const attemptListSchema = listSchema(
  attemptSchema,
  "DeliveryAttemptList",
  "/v1/deliveries/dlv_01JD5V6Y7Z8X9W0V1U2T3S4R5Q/attempts",
);

const responseCodeMessage = "response_code must be a status code from 100 to 599, or one of 2xx, 3xx, 4xx, 5xx";

/** An exact code, or a class (docs/api.md#list-deliveries). */
const responseCodeQuery = z
  .string()
  .transform((value, ctx): ResponseCodeFilter => {
    const exact = /^[1-5][0-9]{2}$/.exec(value);
    if (exact) return { code: Number(value) };
    const range = /^([2-5])xx$/i.exec(value);
    if (range) return { class: Number(range[1]) as ResponseClass };
    ctx.addIssue({ code: "custom", message: responseCodeMessage });
    return z.NEVER;
  })
  .optional()
  .openapi({
    type: "string",
    pattern: "^([1-5][0-9]{2}|[2-5]xx)$",
    description:
      "Only deliveries whose last response had this status: an exact code (100-599), or a class: 2xx, 3xx, 4xx or 5xx.",
    example: "5xx",
  });

export const listDeliveriesQuery = z
  .strictObject({
    // An empty filter is a mistake (a form field left blank), not "match nothing": a 400 says so.
    subscription_id: text(64)
      .min(1, "subscription_id must not be empty: leave it out to list the deliveries of every subscription")
      .optional()
      .openapi({ description: "Only deliveries of this subscription." }),
    status: z
      .enum(deliveryStatuses, { error: "status must be one of queued, delivered, failed" })
      .optional()
      .openapi({ description: "Only deliveries in this state." }),
    event: text(255)
      .min(1, "event must not be empty: leave it out to list the deliveries of every event type")
      .optional()
      .openapi({ description: "Only deliveries of this event type.", example: "invoice.paid" }),
    since: timestampQuery("since", "Only deliveries created at or after this time."),
    until: timestampQuery("until", "Only deliveries created before this time."),
    response_code: responseCodeQuery,
    tenant_id: tenantIdField("Only this tenant's deliveries.").optional(),
    limit: limitQuery,
    ...cursorQueries,
  })
  // An empty window is a mistake, as POST /v1/subscriptions/{id}/recover says of the same one.
  .refine((query) => query.since === undefined || query.until === undefined || query.until > query.since, {
    error: "until must be later than since",
    path: ["until"],
  });

export const listAttemptsQuery = z.strictObject({ limit: limitQuery, ...cursorQueries });

export const deliveryIdParam = z.object({
  delivery_id: z
    .string()
    .openapi({ param: { name: "delivery_id", in: "path" }, example: "dlv_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" }),
});

export function toDeliveryJson(delivery: DeliveryRecord) {
  return {
    id: delivery.id,
    object: "delivery" as const,
    subscription_id: delivery.subscriptionId,
    event_id: delivery.eventId,
    event: delivery.eventType,
    status: delivery.status,
    attempts: delivery.attempts,
    response_code: delivery.responseCode,
    next_retry_at: delivery.nextRetryAt ? isoTimestamp(delivery.nextRetryAt) : null,
    ...tenantIdJson(delivery.tenantId),
    ...(delivery.failureReason === "payload_deleted" ? { failure_reason: "payload_deleted" as const } : {}),
    created_at: isoTimestamp(delivery.createdAt),
  };
}

/** An attempt, with the request it sent: its delivery's snapshot at its own start (docs/api.md#list-a-deliverys-attempts). */
export function toAttemptJson(attempt: AttemptRecord, request: DeliveryRequest) {
  return {
    id: attempt.id,
    object: "delivery_attempt" as const,
    delivery_id: attempt.deliveryId,
    number: attempt.number,
    url: attempt.url,
    started_at: isoTimestamp(attempt.startedAt),
    duration_ms: attempt.durationMs,
    response_code: attempt.responseCode,
    response_body: attempt.responseBody,
    error: attempt.error,
    request_headers: attemptRequestHeaders({
      customHeaders: request.headers,
      eventId: request.eventId,
      startedAt: attempt.startedAt,
      signatureScheme: request.signatureScheme,
      authType: request.authType,
    }),
  };
}

// The routes' request and response types, for the tests and any TypeScript caller. A resend
// takes no body (NoParameters); the send-a-test route answers a DeliveryResponse too.
export type ListDeliveriesQuery = z.input<typeof listDeliveriesQuery>;
export type DeliveryResponse = z.output<typeof deliverySchema>;
export type DeliveryListResponse = z.output<typeof deliveryListSchema>;
export type AttemptResponse = z.output<typeof attemptSchema>;
export type AttemptListResponse = z.output<typeof attemptListSchema>;
