import { batchLoader, type Logger } from "@webhooks/core";
import { deliveryJobChunks, type PublishInput, type PublishResult, publishEvents, type SqlClient } from "@webhooks/db";
import type { DeliveryQueue, DispatchEntry } from "@webhooks/queue";

/** Deliveries per enqueue (one MULTI of dispatch jobs per shard), and the most a batch's result carries. */
export const ENQUEUE_CHUNK = 1_000;

/**
 * Batches being written at once. Publishes that arrive while this many are in flight wait and go
 * together in the next batch, so under load one statement, one commit and one enqueue serve more
 * events; publishing alone (API and PostgreSQL, no worker) is a little slower with it, since a
 * request may wait for a commit not its own. A lone request still goes at once.
 */
const BATCHES_IN_FLIGHT = 2;

export interface EventPublisher {
  publish(input: PublishInput): Promise<PublishResult>;
  /** Resolves once every enqueue started so far has ended (for tests and shutdown). */
  idle(): Promise<void>;
}

/**
 * Publishes that arrive together are written as one batch: one statement, one commit and one
 * enqueue for all of them. A batch goes at the end of the event loop's turn, or, while
 * BATCHES_IN_FLIGHT batches are being written, as soon as one of them ends. A request alone is
 * written alone, without waiting.
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
export function createEventPublisher(deps: { sql: SqlClient; queue: DeliveryQueue; logger: Logger }): EventPublisher {
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
        result.deliveryIds.map((deliveryId) => ({
          deliveryId,
          subscriptionId: result.subscriptionOf.get(deliveryId)!,
        })),
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
  });
  return {
    publish: (input) => loader.load(input),
    async idle() {
      while (streaming.size > 0) await Promise.all(streaming);
    },
  };
}
