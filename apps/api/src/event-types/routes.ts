import { createRoute } from "@hono/zod-openapi";
import {
  archiveEventType,
  createEventType,
  getEventType,
  listEventTypes,
  type TenantScope,
  updateEventType,
} from "@webhooks/db";
import { newRouter, rawInput } from "../http/router.ts";
import { DEFAULT_PAGE_SIZE, errorSchema, jsonResponse, noQueryParameters, operationErrors } from "../http/schemas.ts";
import type { ApiDeps } from "../http/types.ts";
import { validationError } from "../http/validation.ts";
import {
  createEventTypeBody,
  eventTypeListSchema,
  eventTypeNameParam,
  eventTypeSchema,
  listEventTypesQuery,
  notUpdatableFields,
  toEventTypeJson,
  updateEventTypeBody,
} from "./schemas.ts";

const tags = ["Event types"];

const createRouteDef = createRoute({
  method: "post",
  path: "/v1/event-types",
  operationId: "createEventType",
  tags,
  summary: "Add an event type to the catalog",
  description:
    "Declares an event type: its description, and optionally a JSON Schema (draft 2020-12) that the `data` of every " +
    "event of this type must match from now on, and example payloads. Only an unscoped API key may change the catalog " +
    "(403 otherwise). A name already in the catalog, archived or not, is a 409.",
  request: {
    query: noQueryParameters,
    body: { required: true, content: { "application/json": { schema: createEventTypeBody } } },
  },
  responses: {
    201: jsonResponse(eventTypeSchema, "The event type"),
    409: jsonResponse(errorSchema, "An event type of this name is in the catalog already (archived ones too)"),
    ...operationErrors(403, 413, 415),
  },
});

const listRouteDef = createRoute({
  method: "get",
  path: "/v1/event-types",
  operationId: "listEventTypes",
  tags,
  summary: "List the event-type catalog",
  description:
    "By name, paged with starting_after (the last name of the previous page). Archived types only with " +
    "include_archived=true. Every credential may read the catalog, tenant-scoped ones and portal sessions included.",
  request: { query: listEventTypesQuery },
  responses: { 200: jsonResponse(eventTypeListSchema, "A page of event types"), ...operationErrors() },
});

const getRouteDef = createRoute({
  method: "get",
  path: "/v1/event-types/{name}",
  operationId: "getEventType",
  tags,
  summary: "Retrieve an event type",
  description: "The catalog's entry for this name, archived or not.",
  request: { query: noQueryParameters, params: eventTypeNameParam },
  responses: { 200: jsonResponse(eventTypeSchema, "The event type"), ...operationErrors(404) },
});

const updateRouteDef = createRoute({
  method: "put",
  path: "/v1/event-types/{name}",
  operationId: "updateEventType",
  tags,
  summary: "Update an event type",
  description:
    "Partial update of description, schema, examples and deprecated. A new schema applies to every event published " +
    "after this answer, on every API process, and must accept the stored examples unless new ones are sent with it. " +
    "Events published before keep their data as it was. Only an unscoped API key (403 otherwise).",
  request: {
    query: noQueryParameters,
    params: eventTypeNameParam,
    body: { required: true, content: { "application/json": { schema: updateEventTypeBody } } },
  },
  responses: {
    200: jsonResponse(eventTypeSchema, "The updated event type"),
    ...operationErrors(403, 404, 413, 415),
  },
});

const archiveRouteDef = createRoute({
  method: "delete",
  path: "/v1/event-types/{name}",
  operationId: "archiveEventType",
  tags,
  summary: "Archive an event type",
  description:
    "Archives the type (it is never deleted, so its name stays taken and its entry readable): it leaves the list unless " +
    "include_archived=true. Events of it are still published as before, unless EVENT_TYPES_STRICT is on, which refuses " +
    "them from now on. Archiving an archived type changes nothing. Only an unscoped API key (403 otherwise).",
  request: { query: noQueryParameters, params: eventTypeNameParam },
  responses: { 200: jsonResponse(eventTypeSchema, "The archived event type"), ...operationErrors(403, 404) },
});

export function eventTypeRoutes(deps: ApiDeps) {
  const scoped = (c: { var: { principal: { scope: TenantScope } } }) => ({
    db: deps.prisma,
    scope: c.var.principal.scope,
  });
  return newRouter()
    .openapi(createRouteDef, async (c) => {
      const eventType = await createEventType(scoped(c), c.req.valid("json"));
      // This process may remember the name as not in the catalog: forget it at once. The other
      // processes learn of the change from the publish statement (docs/api.md#event-types).
      deps.catalog.forget(eventType.name);
      return c.json(toEventTypeJson(eventType), 201);
    })
    .openapi(listRouteDef, async (c) => {
      const query = c.req.valid("query");
      const page = await listEventTypes(
        { db: deps.prisma },
        {
          limit: query.limit ?? DEFAULT_PAGE_SIZE,
          startingAfter: query.starting_after,
          includeArchived: query.include_archived,
        },
      );
      const data = page.data.map(toEventTypeJson);
      return c.json({ object: "list" as const, url: "/v1/event-types", has_more: page.hasMore, data }, 200);
    })
    .openapi(getRouteDef, async (c) => {
      const eventType = await getEventType({ db: deps.prisma }, c.req.valid("param").name);
      return c.json(toEventTypeJson(eventType), 200);
    })
    .openapi(
      updateRouteDef,
      async (c) => {
        const eventType = await updateEventType(scoped(c), c.req.valid("param").name, c.req.valid("json"));
        deps.catalog.forget(eventType.name);
        return c.json(toEventTypeJson(eventType), 200);
      },
      (result) => {
        if (!result.success)
          throw validationError(result.error, rawInput(result), { notUpdatable: notUpdatableFields });
        return undefined;
      },
    )
    .openapi(archiveRouteDef, async (c) => {
      const eventType = await archiveEventType(scoped(c), c.req.valid("param").name);
      deps.catalog.forget(eventType.name);
      return c.json(toEventTypeJson(eventType), 200);
    });
}
