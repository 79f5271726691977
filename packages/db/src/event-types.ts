import {
  ALL_EVENT_TYPES,
  ConflictError,
  compileEventSchema,
  describePayloadProblem,
  eventTypeSchema,
  isOperationalEventType,
  NotFoundError,
  OPERATIONAL_PREFIX,
  operationalEventTypes,
  type PayloadValidator,
  ValidationError,
} from "@webhooks/core";
import { inTransaction, Prisma, type PrismaClientOrTransaction } from "./client.ts";
import type { Page } from "./paging.ts";
import { requireUnscoped, type ScopedContext } from "./tenant-scope.ts";

/**
 * The event-type catalog (docs/api.md#event-types). Every credential reads it; only an unscoped
 * one changes it (a tenant's people see the catalog of the platform they use, never write it).
 * A type is never deleted: archiving it keeps its history readable.
 */
export interface EventTypeRecord {
  name: string;
  description: string;
  /** A JSON Schema (draft 2020-12), or null. */
  schema: Record<string, unknown> | null;
  examples: Record<string, unknown>[];
  deprecated: boolean;
  archived: boolean;
  /** Bumped by every change (see the publish statement's check in events.ts). */
  revision: number;
  createdAt: Date;
  updatedAt: Date;
}

type EventTypeRow = Omit<EventTypeRecord, "schema" | "examples"> & {
  schema: Prisma.JsonValue;
  examples: Prisma.JsonValue;
};

/** Only the API writes these columns, after checking them (the schema an object, examples an array of objects). */
function toRecord(row: EventTypeRow): EventTypeRecord {
  return {
    ...row,
    schema: row.schema as Record<string, unknown> | null,
    examples: row.examples as Record<string, unknown>[],
  };
}

export const MAX_EVENT_TYPE_EXAMPLES = 5;

const notFound = (name: string) => new NotFoundError(`No such event type: ${name}`, "name");

/** The schema compiled, or a 400 on `schema` saying what is wrong with it. */
function compiledSchema(schema: Record<string, unknown>): PayloadValidator {
  const compiled = compileEventSchema(schema);
  if (!compiled.ok) throw new ValidationError(`schema ${compiled.problem}`, "parameter_invalid", "schema");
  return compiled.validate;
}

/** Every example must be valid against the schema (when there is one). */
function checkExamples(
  schema: Record<string, unknown> | null,
  examples: Record<string, unknown>[],
  blame: "examples" | "schema",
): void {
  if (schema === null) return;
  const validate = compiledSchema(schema);
  examples.forEach((example, i) => {
    const problem = validate(example);
    if (!problem) return;
    const where = describePayloadProblem(problem);
    throw blame === "examples"
      ? new ValidationError(`examples[${i}] does not match the schema: ${where}`, "parameter_invalid", `examples[${i}]`)
      : new ValidationError(
          `schema does not accept the stored examples[${i}] (${where}): send examples that match it along with it`,
          "parameter_invalid",
          "schema",
        );
  });
}

const CATALOG_WRITE = "change the event-type catalog";

const eventTypeColumns = Prisma.raw(
  `name, description, schema, examples, deprecated, archived, revision, created_at AS "createdAt", updated_at AS "updatedAt"`,
);

/** A JSON column's value as a statement parameter: SQL NULL for null. */
const jsonParam = (value: unknown) => (value === null ? null : JSON.stringify(value));

export async function createEventType(
  ctx: ScopedContext,
  input: {
    name: string;
    description?: string | undefined;
    schema?: Record<string, unknown> | null | undefined;
    examples?: Record<string, unknown>[] | undefined;
  },
): Promise<EventTypeRecord> {
  requireUnscoped(ctx.scope, CATALOG_WRITE);
  if (isOperationalEventType(input.name)) {
    throw new ValidationError(
      `name must not start with "${OPERATIONAL_PREFIX}": operational events are the service's own`,
      "parameter_invalid",
      "name",
    );
  }
  const schema = input.schema ?? null;
  const examples = input.examples ?? [];
  if (schema !== null) compiledSchema(schema);
  checkExamples(schema, examples, "examples");
  // ON CONFLICT DO NOTHING: a name taken, even by a concurrent create, answers a 409 rather than
  // a unique-violation error.
  const [created] = await ctx.db.$queryRaw<EventTypeRow[]>`
    INSERT INTO event_types (name, description, schema, examples)
    VALUES (${input.name}, ${input.description ?? ""}, ${jsonParam(schema)}::jsonb, ${jsonParam(examples)}::jsonb)
    ON CONFLICT (name) DO NOTHING
    RETURNING ${eventTypeColumns}`;
  if (!created) throw new ConflictError(`An event type named ${input.name} already exists`, "name");
  return toRecord(created);
}

/** A catalog entry by name, archived or not; a name that is not one is a 404. */
export async function getEventType(ctx: { db: PrismaClientOrTransaction }, name: string): Promise<EventTypeRecord> {
  const found = await findEventType(ctx, name);
  if (!found) throw notFound(name);
  return found;
}

/** A catalog entry by name, or null when there is none (the API's catalog cache reads through this). */
export async function findEventType(
  ctx: { db: PrismaClientOrTransaction },
  name: string,
): Promise<EventTypeRecord | null> {
  if (!eventTypeSchema.safeParse(name).success) return null;
  const row = await ctx.db.eventType.findUnique({ where: { name } });
  return row ? toRecord(row) : null;
}

/**
 * By name, byte order; `startingAfter` is a name (the last of the previous page), and the page
 * continues with the names after it whether or not that one still exists. Archived types are
 * listed only when asked for.
 */
export async function listEventTypes(
  ctx: { db: PrismaClientOrTransaction },
  query: { limit: number; startingAfter?: string | undefined; includeArchived?: boolean | undefined },
): Promise<Page<EventTypeRecord>> {
  const rows = await ctx.db.eventType.findMany({
    where: {
      ...(query.includeArchived ? {} : { archived: false }),
      ...(query.startingAfter === undefined ? {} : { name: { gt: query.startingAfter } }),
    },
    orderBy: { name: "asc" },
    take: query.limit + 1,
  });
  return { data: rows.slice(0, query.limit).map(toRecord), hasMore: rows.length > query.limit };
}

/**
 * A partial update of description, schema, examples and deprecated. The stored examples must
 * still match a new schema (and new examples the schema, new or stored). The row is locked while
 * this is checked, so two updates never each check against the state the other replaces.
 */
export async function updateEventType(
  ctx: ScopedContext,
  name: string,
  changes: {
    description?: string | undefined;
    schema?: Record<string, unknown> | null | undefined;
    examples?: Record<string, unknown>[] | undefined;
    deprecated?: boolean | undefined;
  },
): Promise<EventTypeRecord> {
  requireUnscoped(ctx.scope, CATALOG_WRITE);
  if (!eventTypeSchema.safeParse(name).success) throw notFound(name);
  return inTransaction(ctx.db, async (tx) => {
    const [current] = await tx.$queryRaw<EventTypeRow[]>`
      SELECT ${eventTypeColumns} FROM event_types WHERE name = ${name} FOR NO KEY UPDATE`;
    if (!current) throw notFound(name);
    const schema = changes.schema === undefined ? (current.schema as Record<string, unknown> | null) : changes.schema;
    if (changes.schema !== undefined && changes.schema !== null) compiledSchema(changes.schema);
    if (changes.examples !== undefined) checkExamples(schema, changes.examples, "examples");
    else if (changes.schema !== undefined)
      checkExamples(schema, current.examples as Record<string, unknown>[], "schema");
    const [updated] = await tx.$queryRaw<EventTypeRow[]>`
      UPDATE event_types SET
        description = coalesce(${changes.description ?? null}, description),
        schema = CASE WHEN ${changes.schema !== undefined}::boolean THEN ${jsonParam(changes.schema ?? null)}::jsonb ELSE schema END,
        examples = coalesce(${changes.examples === undefined ? null : JSON.stringify(changes.examples)}::jsonb, examples),
        deprecated = coalesce(${changes.deprecated ?? null}::boolean, deprecated),
        revision = revision + 1,
        updated_at = now()
      WHERE name = ${name}
      RETURNING ${eventTypeColumns}`;
    return toRecord(updated!);
  });
}

/** Archives a type (DELETE): it leaves the list unless archived ones are asked for. Archiving twice changes nothing. */
export async function archiveEventType(ctx: ScopedContext, name: string): Promise<EventTypeRecord> {
  requireUnscoped(ctx.scope, CATALOG_WRITE);
  if (!eventTypeSchema.safeParse(name).success) throw notFound(name);
  await ctx.db.$executeRaw`
    UPDATE event_types SET archived = true, revision = revision + 1, updated_at = now()
    WHERE name = ${name} AND NOT archived`;
  return getEventType(ctx, name);
}

/** The operational types the service publishes: a subscription may name them in strict mode too. */
const OPERATIONAL_TYPES: readonly string[] = Object.values(operationalEventTypes);

/**
 * EVENT_TYPES_STRICT for subscriptions: every name of `events` must be "*", an operational type
 * the service publishes, or a type of the catalog that is not archived; otherwise a 400
 * unknown_event_type on `events`.
 */
export async function assertSubscribableEventTypes(
  ctx: { db: PrismaClientOrTransaction },
  events: readonly string[],
): Promise<void> {
  const names = events.filter((name) => name !== ALL_EVENT_TYPES && !OPERATIONAL_TYPES.includes(name));
  if (names.length === 0) return;
  const known = await ctx.db.eventType.findMany({
    where: { name: { in: names }, archived: false },
    select: { name: true },
  });
  const knownNames = new Set(known.map((row) => row.name));
  const unknown = names.filter((name) => !knownNames.has(name));
  if (unknown.length > 0) {
    throw new ValidationError(
      `events names ${unknown.length === 1 ? "a type" : "types"} that the event-type catalog does not have (or has archived): ${unknown.join(", ")}`,
      "unknown_event_type",
      "events",
    );
  }
}
