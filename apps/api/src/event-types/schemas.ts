import { z } from "@hono/zod-openapi";
import { JSON_SCHEMA_DIALECT, OPERATIONAL_PREFIX, eventTypeSchema as typeName } from "@webhooks/core";
import { type EventTypeRecord, MAX_EVENT_TYPE_EXAMPLES } from "@webhooks/db";
import { isJsonObject, isoTimestamp, jsonObject, limitQuery, listSchema, text } from "../http/schemas.ts";

const name = typeName.meta({
  description:
    "The event type's name, as events carry it: letters, digits and `_ - . :`, up to 255 characters. " +
    `Names starting with "${OPERATIONAL_PREFIX}" are the service's own.`,
  example: "invoice.paid",
});

const description = text(1024).openapi({
  description: "What the event means, for the people who subscribe to it.",
  example: "An invoice was paid in full.",
});

const schemaDescription =
  `A JSON Schema (draft 2020-12, \`${JSON_SCHEMA_DIALECT}\`) that every published event's \`data\` must match ` +
  "(POST /v1/events answers 422 otherwise), or null for none. `format` is checked for the formats of ajv-formats " +
  "(date-time, email, uri, uuid, ...); an unknown format is refused. `$ref` resolves within the schema only.";

const anyObject = { type: "object", additionalProperties: true } as const;

const schema = jsonObject("schema")
  .openapi(anyObject)
  .nullable()
  .openapi({
    type: ["object", "null"],
    description: schemaDescription,
    example: {
      type: "object",
      properties: { invoice_id: { type: "string" }, amount: { type: "integer" } },
      required: ["invoice_id", "amount"],
    },
  });

const examples = z
  .array(jsonObject().openapi(anyObject))
  .max(MAX_EVENT_TYPE_EXAMPLES, `examples must hold at most ${MAX_EVENT_TYPE_EXAMPLES} payloads`)
  .openapi({
    description: `Up to ${MAX_EVENT_TYPE_EXAMPLES} example payloads (\`data\`), each valid against the schema.`,
    example: [{ invoice_id: "in_123", amount: 4200 }],
  });

const deprecated = z.boolean().openapi({
  description:
    "Marks the type as on its way out: events of it are still published and delivered as before; subscribers see " +
    "the mark in the catalog (and the portal), a hint to move on to its replacement.",
});

export const eventTypeSchema = z
  .object({
    object: z.literal("event_type"),
    name: z.string().openapi({ example: "invoice.paid" }),
    description: z.string(),
    schema: z
      .custom<Record<string, unknown>>(isJsonObject)
      .openapi(anyObject)
      .nullable()
      .openapi({ type: ["object", "null"], description: "The JSON Schema of `data`, or null." }),
    examples: z.array(z.custom<Record<string, unknown>>(isJsonObject).openapi(anyObject)),
    deprecated: z.boolean(),
    archived: z.boolean().openapi({
      description:
        "Archived (DELETE) types are listed only with include_archived=true. With EVENT_TYPES_STRICT, an archived type " +
        "can no longer be published nor subscribed to.",
    }),
    created_at: z.string().openapi({ format: "date-time" }),
    updated_at: z.string().openapi({ format: "date-time" }),
  })
  .openapi("EventType");

export const eventTypeListSchema = listSchema(
  eventTypeSchema,
  "EventTypeList",
  "/v1/event-types",
  "Event types, by name.",
);

export const createEventTypeBody = z
  .strictObject({
    name,
    description: description.optional().openapi({ default: "" }),
    schema: schema.optional().openapi({ default: null }),
    examples: examples.optional().openapi({ default: [] }),
  })
  .openapi("CreateEventType");

export const updateEventTypeBody = z
  .strictObject({
    description: description.optional(),
    schema: schema.optional().openapi({
      description: `${schemaDescription} A new schema must accept the stored examples, unless examples are sent with it.`,
    }),
    examples: examples.optional().openapi({ description: "Replaces the whole list; [] removes them." }),
    deprecated: deprecated.optional(),
  })
  .openapi("UpdateEventType");

/** Sending these to PUT gets a message saying so, rather than "unknown parameter". */
export const notUpdatableFields = ["name", "archived", "created_at", "updated_at"] as const;

export const eventTypeNameParam = z.object({
  name: z.string().openapi({ param: { name: "name", in: "path" }, example: "invoice.paid" }),
});

const includeArchivedMessage = "include_archived must be true or false";

export const listEventTypesQuery = z.strictObject({
  limit: limitQuery,
  starting_after: typeName.optional().openapi({
    description: "A name from the previous page (its last): returns the names after it.",
  }),
  include_archived: z
    .enum(["true", "false"], { error: includeArchivedMessage })
    .transform((value) => value === "true")
    .optional()
    .openapi({ type: "boolean", default: false, description: "Also list archived types." }),
});

export function toEventTypeJson(eventType: EventTypeRecord) {
  return {
    object: "event_type" as const,
    name: eventType.name,
    description: eventType.description,
    schema: eventType.schema,
    examples: eventType.examples,
    deprecated: eventType.deprecated,
    archived: eventType.archived,
    created_at: isoTimestamp(eventType.createdAt),
    updated_at: isoTimestamp(eventType.updatedAt),
  };
}

// The routes' request and response types, for the tests, the portal and any TypeScript caller.
export type CreateEventTypeRequest = z.input<typeof createEventTypeBody>;
export type UpdateEventTypeRequest = z.input<typeof updateEventTypeBody>;
export type EventTypeResponse = z.output<typeof eventTypeSchema>;
export type EventTypeListResponse = z.output<typeof eventTypeListSchema>;
