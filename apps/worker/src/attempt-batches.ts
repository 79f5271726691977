import { claimDeliveries, recordAttempts, type AttemptToRecord, type ClaimedDelivery, type SqlClient } from "@webhooks/db";
import DataLoader from "dataloader";

/**
 * Claims and records of the jobs a worker runs at the same time, sent to PostgreSQL as one
 * statement per batch instead of one per delivery: at high throughput this divides the round
 * trips, the commits and the per-query client overhead by the batch size. A batch is whatever
 * arrived during the current turn of the event loop, so a lone delivery waits for nothing.
 */
const MAX_BATCH = 200;
const schedule = { cache: false, maxBatchSize: MAX_BATCH, batchScheduleFn: (flush: () => void) => setImmediate(flush) };

export interface AttemptBatches {
  /** The delivery's snapshot with a lease on it, or null if it could not be claimed. */
  claim(deliveryId: string, leaseToken: string): Promise<ClaimedDelivery | null>;
  /** Whether the attempt was recorded (false: the lease was lost to another worker). */
  record(record: AttemptToRecord): Promise<boolean>;
}

export function createAttemptBatches(sql: SqlClient, leaseMs: number): AttemptBatches {
  const claims = new DataLoader<{ deliveryId: string; leaseToken: string }, ClaimedDelivery | null>(async (requests) => {
    const claimed = await claimDeliveries({ sql }, { claims: [...requests], leaseMs });
    return requests.map((request) => claimed.get(request.deliveryId) ?? null);
  }, schedule);

  const records = new DataLoader<AttemptToRecord, boolean>(async (requests) => {
    const recorded = await recordAttempts({ sql }, [...requests]);
    return requests.map((request) => recorded.has(request.deliveryId));
  }, schedule);

  return {
    claim: (deliveryId, leaseToken) => claims.load({ deliveryId, leaseToken }),
    record: (record) => records.load(record),
  };
}
