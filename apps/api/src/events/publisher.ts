import { batchLoader, type Logger } from "@webhooks/core";
import {
  CatalogChangedError,
  deliveryJobChunks,
  hasIdempotentEvent,
  type PublishInput,
  type PublishResult,
  publishEvents,
  type SqlClient,
} from "@webhooks/db";
import type { DeliveryQueue, DispatchEntry } from "@webhooks/queue";
import type { EventTypeCatalogCache } from "./catalog-cache.ts";

/** Deliveries per enqueue (one MULTI of dispatch jobs per shard), and the most a batch's result carries. */
export const ENQUEUE_CHUNK = 1_000;

/**
 * Batches being written at once. Publishes that arrive while this many are in flight wait and go
 * together in the next batch, so under load one statement, one commit and one enqueue serve more
 * events; publishing alone (API and PostgreSQL, no worker) is a little slower with it, since a
 * request may wait for a commit not its own. A lone request still goes at once (and a steady
 * stream of them shares batches within the batch window: DEFAULT_PUBLISH_BATCH_WINDOW_MS).
 */
const BATCHES_IN_FLIGHT = 2;

/**
 * How many times an event is checked against its type again when the type keeps changing under
 * it: each time means another change was committed in the moment between check and write.
 */
const MAX_CATALOG_CHECKS = 5;

export interface EventPublisher {
  /**
   * Checks the event against the event-type catalog (refusals are thrown: a 400 in strict mode,
   * a 422 for data its schema refuses), then publishes it.
   */
  publish(input: Omit<PublishInput, "catalogRevision">): Promise<PublishResult>;
  /** Resolves once every enqueue started so far has ended (for tests and shutdown). */
  idle(): Promise<void>;
}

/**
 * Publishes that arrive together are written as one batch: one statement, one commit and one
 * enqueue for all of them. A batch goes at the end of the event loop's turn, no sooner than
 * `batchWindowMs` after the one before it, and, while BATCHES_IN_FLIGHT batches are being written,
 * as soon as one of them ends. A request after a quiet spell is written alone, without waiting.
 *
 * Jobs are added after commit (docs/architecture.md#how-a-publish-flows), as dispatch jobs of up to
 * 20 deliveries each (see the job catalog): one job per delivery cost the API, the worker and Redis
 * BullMQ's work per job for each delivery. A batch with few deliveries gets them back from the
 * insert and enqueues them before answering. A big fan-out does not: its event is accepted once
 * committed, and its deliveries are read back and enqueued ENQUEUE_CHUNK at a time, so that one
 * event to 10,000 subscriptions neither waits for 10,000 jobs nor holds them all in memory. If
 * Redis cannot take them (or the process stops midway), the events are still accepted: the worker's
 * reconciler finds the deliveries in PostgreSQL and enqueues them.
 */
export function createEventPublisher(deps: {
  sql: SqlClient;
  queue: DeliveryQueue;
  logger: Logger;
  catalog: EventTypeCatalogCache;
  /** PUBLISH_BATCH_WINDOW. */
  batchWindowMs: number;
}): EventPublisher {
  const streaming = new Set<Promise<void>>();

  const dispatch = async (deliveries: DispatchEntry[]) => {
    try {
      await deps.queue.dispatch(deliveries);
      return true;
    } catch (error) {
      deps.logger.warn(
        { err: error, deliveries: deliveries.length },
        "could not enqueue deliveries; the reconciler will",
      );
      return false;
    }
  };

  const enqueueInChunks = async (result: PublishResult) => {
    try {
      for await (const chunk of deliveryJobChunks({ sql: deps.sql }, result.deliveryIdBlock, ENQUEUE_CHUNK)) {
        if (!(await dispatch(chunk))) return;
      }
    } catch (error) {
      deps.logger.warn(
        { err: error, eventId: result.event.id },
        "could not read back the deliveries to enqueue; the reconciler will",
      );
    }
  };

  const writeBatch = async (inputs: PublishInput[]) => {
    const results = await publishEvents({ sql: deps.sql }, inputs, { returnLimit: ENQUEUE_CHUNK });
    const created = results.flatMap((result) => (result instanceof Error || !result.created ? [] : [result]));
    const returned = created.filter((result) => result.deliveryIds.length === result.deliveryCount);
    await dispatch(
      returned.flatMap((result) =>
        result.deliveryIds.map((deliveryId) => {
          const subscriptionId = result.subscriptionOf.get(deliveryId);
          return subscriptionId === undefined ? { deliveryId } : { deliveryId, subscriptionId };
        }),
      ),
    );
    for (const result of created) {
      if (result.deliveryIds.length === result.deliveryCount) continue;
      const run = enqueueInChunks(result).finally(() => streaming.delete(run));
      streaming.add(run);
    }
    return results;
  };

  const loader = batchLoader<PublishInput, PublishResult>((inputs) => writeBatch([...inputs]), {
    maxBatchSize: 100,
    inFlight: BATCHES_IN_FLIGHT,
    gatherMs: deps.batchWindowMs,
  });
  /**
   * A retry with the Idempotency-Key of an event accepted earlier gets that event, even if the
   * catalog would refuse the event now (its schema changed since): the key is looked up before
   * the refusal is answered.
   */
  const check = async (input: Omit<PublishInput, "catalogRevision">): Promise<number | undefined> => {
    try {
      return await deps.catalog.checkPublish(input.type, input.data);
    } catch (refusal) {
      if (input.idempotencyKey !== undefined && (await hasIdempotentEvent({ sql: deps.sql }, input.idempotencyKey)))
        return undefined;
      throw refusal;
    }
  };

  return {
    async publish(input) {
      for (let checks = 1; ; checks++) {
        const catalogRevision = await check(input);
        try {
          return await loader.load({ ...input, catalogRevision });
        } catch (error) {
          // The type changed between the check and the write (on another process, most likely):
          // nothing was written; check the event against the type as it is now.
          if (!(error instanceof CatalogChangedError) || checks >= MAX_CATALOG_CHECKS) throw error;
          deps.catalog.forget(input.type);
        }
      }
    },
    async idle() {
      while (streaming.size > 0) await Promise.all(streaming);
    },
  };
}
