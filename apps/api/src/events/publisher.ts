import type { Logger } from "@webhooks/core";
import { publishEvents, type PublishInput, type PublishResult, type SqlClient } from "@webhooks/db";
import type { DeliveryQueue } from "@webhooks/queue";
import DataLoader from "dataloader";

/**
 * Publishes that arrive together (in the same turn of the event loop) are written as one batch:
 * one subscription lookup, one insert statement, one commit and one enqueue for all of them.
 * A request alone is written alone, without waiting.
 */
export function createEventPublisher(deps: { sql: SqlClient; queue: DeliveryQueue; logger: Logger }): { publish(input: PublishInput): Promise<PublishResult> } {
  const loader = new DataLoader<PublishInput, PublishResult>(
    async (inputs) => {
      const results = await publishEvents({ sql: deps.sql }, [...inputs]);
      // After commit (contract §7). If Redis cannot take them now, the events are still accepted:
      // the worker's reconciler finds the deliveries in PostgreSQL and enqueues them.
      const created = results.flatMap((result) => (result instanceof Error || !result.created ? [] : [result]));
      const deliveryIds = created.flatMap((result) => result.deliveryIds);
      const subscriptionOf = new Map(created.flatMap((result) => [...result.subscriptionOf]));
      try {
        await deps.queue.enqueue(deliveryIds, subscriptionOf);
      } catch (error) {
        deps.logger.warn({ err: error, deliveries: deliveryIds.length }, "could not enqueue deliveries; the reconciler will");
      }
      return results;
    },
    { cache: false, maxBatchSize: 100, batchScheduleFn: (flush) => setImmediate(flush) },
  );
  return { publish: (input) => loader.load(input) };
}
