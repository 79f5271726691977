import { publishEvents, type PublishContext, type PublishInput, type PublishResult } from "@webhooks/db";
import DataLoader from "dataloader";

/**
 * Publishes that arrive together (in the same turn of the event loop) are written as one batch:
 * one subscription lookup, one insert statement, one commit and one enqueue for all of them.
 * A request alone is written alone, without waiting.
 */
export function createEventPublisher(ctx: PublishContext): { publish(input: PublishInput): Promise<PublishResult> } {
  const loader = new DataLoader<PublishInput, PublishResult>((inputs) => publishEvents(ctx, [...inputs]), {
    cache: false,
    maxBatchSize: 100,
    batchScheduleFn: (flush) => setImmediate(flush),
  });
  return { publish: (input) => loader.load(input) };
}
