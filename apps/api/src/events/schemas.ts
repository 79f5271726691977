import { z } from "@hono/zod-openapi";
import { eventTypeSchema, isOperationalEventType, OPERATIONAL_PREFIX } from "@webhooks/core";
import type { EventRecord } from "@webhooks/db";
import { isoTimestamp, jsonObject, tenantIdField, tenantIdJson, tenantIdResponseField } from "../http/schemas.ts";

/** The event's payload: any JSON object (see jsonObject). */
export const eventData = jsonObject("data").openapi({
  type: "object",
  additionalProperties: true,
  description: "The event's payload: any JSON object.",
  example: { invoice_id: "in_123", amount_due: 4200 },
});

export const publishEventBody = z
  .strictObject({
    // docs/api.md#operational-events: operational events are the service's own; a client publishing
    // one could impersonate the service to every subscription that names them.
    type: eventTypeSchema
      .refine((type) => !isOperationalEventType(type), {
        error: `type must not start with "${OPERATIONAL_PREFIX}": operational events are published by the service itself`,
      })
      .meta({
        description: `The event type. Types starting with "${OPERATIONAL_PREFIX}" are reserved for the service.`,
        example: "invoice.paid",
      }),
    data: eventData,
    tenant_id: tenantIdField(
      "The tenant (your customer) the event is for: it is delivered only to that tenant's subscriptions. " +
        "Without it, only to subscriptions that belong to no tenant.",
    ).optional(),
  })
  .openapi("PublishEvent");

const idempotencyKeyMessage = "Idempotency-Key must be 1 to 255 printable ASCII characters";

export const idempotencyHeaders = z.object({
  // Printable ASCII only: Node reads other header bytes as latin1, so a UTF-8 key would be stored
  // garbled, and would not match the same key sent through a client that encodes it otherwise.
  "Idempotency-Key": z
    .string()
    .regex(/^[\x20-\x7e]{1,255}$/, idempotencyKeyMessage)
    .optional()
    .openapi({
      param: { name: "Idempotency-Key", in: "header" },
      description:
        "Makes retries safe: the same key with the same body returns the event created the first time. " +
        "1 to 255 printable ASCII characters.",
    }),
});

export const eventSchema = z
  .object({
    id: z.string().openapi({ example: "evt_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" }),
    object: z.literal("event"),
    type: z.string(),
    data: z
      .record(z.string(), z.unknown())
      .nullable()
      .openapi({ description: "The event's payload; null once erased (see payload_deleted_at)." }),
    tenant_id: tenantIdResponseField,
    created_at: z.string().openapi({ format: "date-time" }),
    payload_deleted_at: z.string().nullable().openapi({
      format: "date-time",
      description:
        "When the payload was erased, by DELETE /v1/events/{event_id}/payload or PAYLOAD_RETENTION; null while it is kept.",
    }),
  })
  .openapi("Event");

export const eventIdParam = z.object({
  event_id: z.string().openapi({ param: { name: "event_id", in: "path" }, example: "evt_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" }),
});

export function toEventJson(event: EventRecord) {
  return {
    id: event.id,
    object: "event" as const,
    type: event.type,
    data: event.data,
    ...tenantIdJson(event.tenantId),
    created_at: isoTimestamp(event.createdAt),
    payload_deleted_at: event.payloadDeletedAt ? isoTimestamp(event.payloadDeletedAt) : null,
  };
}

// The routes' request and response types, for the tests and any TypeScript caller.
export type PublishEventRequest = z.input<typeof publishEventBody>;
export type EventResponse = z.output<typeof eventSchema>;
