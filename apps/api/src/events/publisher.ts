import type { Logger } from "@webhooks/core";
import { deliveryJobChunks, publishEvents, type PublishInput, type PublishResult, type SqlClient } from "@webhooks/db";
import type { DeliveryQueue } from "@webhooks/queue";
import DataLoader from "dataloader";

/** Deliveries per enqueue (one MULTI per shard), and the most a batch's result carries. */
export const ENQUEUE_CHUNK = 1_000;

export interface EventPublisher {
  publish(input: PublishInput): Promise<PublishResult>;
  /** Resolves once every enqueue started so far has ended (for tests and shutdown). */
  idle(): Promise<void>;
}

/**
 * Publishes that arrive together (in the same turn of the event loop) are written as one batch:
 * one statement, one commit and one enqueue for all of them. A request alone is written alone,
 * without waiting. (Holding batches back while others are being written, to make them bigger,
 * was measured on W1 and lowered it: each request then waits for a commit not its own, and
 * PostgreSQL already flushes the WAL once for the commits that arrive together.)
 *
 * Jobs are added after commit (contract §7). A batch with few deliveries gets them back from the
 * insert and enqueues them before answering. A big fan-out does not: its event is accepted once
 * committed, and its deliveries are read back and enqueued ENQUEUE_CHUNK at a time, so that one
 * event to 10,000 subscriptions neither waits for 10,000 jobs nor holds them all in memory. If
 * Redis cannot take them (or the process stops midway), the events are still accepted: the
 * worker's reconciler finds the deliveries in PostgreSQL and enqueues them.
 */
export function createEventPublisher(deps: { sql: SqlClient; queue: DeliveryQueue; logger: Logger }): EventPublisher {
  const streaming = new Set<Promise<void>>();

  const enqueue = async (deliveryIds: string[], subscriptionOf: ReadonlyMap<string, string>) => {
    try {
      await deps.queue.enqueue(deliveryIds, subscriptionOf);
      return true;
    } catch (error) {
      deps.logger.warn({ err: error, deliveries: deliveryIds.length }, "could not enqueue deliveries; the reconciler will");
      return false;
    }
  };

  const enqueueInChunks = async (result: PublishResult) => {
    try {
      for await (const chunk of deliveryJobChunks({ sql: deps.sql }, result.deliveryIdBlock, ENQUEUE_CHUNK)) {
        const ok = await enqueue(
          chunk.map((job) => job.deliveryId),
          new Map(chunk.map((job) => [job.deliveryId, job.subscriptionId])),
        );
        if (!ok) return;
      }
    } catch (error) {
      deps.logger.warn({ err: error, eventId: result.event.id }, "could not read back the deliveries to enqueue; the reconciler will");
    }
  };

  const writeBatch = async (inputs: PublishInput[]) => {
    const results = await publishEvents({ sql: deps.sql }, inputs, { returnLimit: ENQUEUE_CHUNK });
    const created = results.flatMap((result) => (result instanceof Error || !result.created ? [] : [result]));
    const returned = created.filter((result) => result.deliveryIds.length === result.deliveryCount);
    await enqueue(
      returned.flatMap((result) => result.deliveryIds),
      new Map(returned.flatMap((result) => [...result.subscriptionOf])),
    );
    for (const result of created) {
      if (result.deliveryIds.length === result.deliveryCount) continue;
      const run = enqueueInChunks(result).finally(() => streaming.delete(run));
      streaming.add(run);
    }
    return results;
  };

  const loader = new DataLoader<PublishInput, PublishResult>((inputs) => writeBatch([...inputs]), {
    cache: false,
    maxBatchSize: 100,
    batchScheduleFn: (flush) => setImmediate(flush),
  });
  return {
    publish: (input) => loader.load(input),
    async idle() {
      while (streaming.size > 0) await Promise.all(streaming);
    },
  };
}
