import { NotFoundError } from "@webhooks/core";
import { type EventRecord, getEvent } from "./events.ts";
import { isInScope, type ScopedContext } from "./tenant-scope.ts";

/**
 * An event as a route may read it (docs/api.md#tenants): another tenant's event is not found,
 * exactly as an id that does not exist. events.ts owns the publish path and reads events by id for
 * it; this applies the caller's scope to that read, so that the routes reach events only through
 * here.
 */
export async function getEventInScope(ctx: ScopedContext, id: string): Promise<EventRecord> {
  const event = await getEvent(ctx, id);
  if (!isInScope(ctx.scope, event.tenantId)) throw new NotFoundError(`No such event: ${id}`, "event_id");
  return event;
}
