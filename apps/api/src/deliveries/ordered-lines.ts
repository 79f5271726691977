import type { Logger } from "@webhooks/core";
import { nextInLine } from "@webhooks/db";
import type { ApiDeps } from "../http/types.ts";

/** Deliveries per enqueue of a released line. */
const RELEASE_CHUNK = 1_000;

/**
 * The API's part in ordered delivery (docs/api.md#ordered-delivery): a resend or a recover takes
 * deliveries out of their line, and a switch to "none" releases it. Both may let others go now,
 * and they are enqueued after commit. A failure is logged, never the request's: PostgreSQL says
 * who may go, and the reconciler's next pass enqueues what this could not.
 */

/** After a resend or a recover: the head of the subscription's line, if its turn has come. */
export async function enqueueNextInLine(
  deps: Pick<ApiDeps, "pool" | "queue">,
  logger: Logger,
  subscriptionId: string,
): Promise<void> {
  try {
    await deps.queue.enqueue(await nextInLine({ sql: deps.pool }, [subscriptionId]));
  } catch (error) {
    logger.warn({ err: error, subscriptionId }, "could not enqueue the next delivery in line; the reconciler will");
  }
}

/** After a switch to "none": every delivery that waited in the line. */
export async function enqueueReleased(
  deps: Pick<ApiDeps, "queue">,
  logger: Logger,
  subscriptionId: string,
  released: string[],
): Promise<void> {
  try {
    for (let i = 0; i < released.length; i += RELEASE_CHUNK)
      await deps.queue.enqueue(released.slice(i, i + RELEASE_CHUNK));
  } catch (error) {
    logger.warn(
      { err: error, subscriptionId, deliveries: released.length },
      "could not enqueue the deliveries released from their line; the reconciler will",
    );
  }
}
