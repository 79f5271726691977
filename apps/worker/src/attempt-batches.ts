import { batchLoader, DEFAULT_DATABASE_QUERY_TIMEOUT_MS, type HealthRules } from "@webhooks/core";
import {
  type AttemptLease,
  type AttemptToRecord,
  type ClaimedDelivery,
  claimDeliveries,
  type EndpointResult,
  type HealthUpdate,
  type RecordedAttempt,
  recordAttempts,
  recordEndpointResults,
  type SqlClient,
  withdrawAttempts,
} from "@webhooks/db";

/**
 * The statements of the jobs a worker runs at the same time, sent to PostgreSQL as one per batch
 * instead of one per delivery (core's batchLoader): at high throughput this divides the round
 * trips, the commits and the per-query client overhead by the batch size.
 */
const MAX_BATCH = 200;

/**
 * Claims and records, the two statements of every attempt, also wait while this many batches of
 * their kind are being written, and go with the next batch when one ends: when deliveries arrive
 * one by one (each event to one subscription), each turn of the event loop would otherwise send
 * its own small batch.
 */
const BATCHES_IN_FLIGHT = 2;

/** A record's statement is given at least this long, whatever its caller has left. */
const MIN_RECORD_TIMEOUT_MS = 100;

export interface AttemptBatches {
  /** The delivery's snapshot with a lease on it and its attempt begun, or null if it could not be claimed. */
  claim(deliveryId: string, leaseToken: string): Promise<ClaimedDelivery | null>;
  /** Takes the claimed attempt back, unsent, and gives the lease back. */
  withdraw(lease: AttemptLease): Promise<void>;
  /**
   * The attempt as recorded, or undefined when it was not (the lease was lost to another worker).
   * Its statement fails as one unanswered for DATABASE_QUERY_TIMEOUT does if it is not answered
   * by `answerBy` (epoch ms; the statement of a batch waits until the earliest of its records').
   */
  record(record: AttemptToRecord, answerBy: number): Promise<RecordedAttempt | undefined>;
  /**
   * The subscription's health after this attempt (undefined when another attempt of the same
   * batch reports it), and the operational deliveries it published.
   */
  recordHealth(result: EndpointResult): Promise<{ update: HealthUpdate | undefined; deliveryIds: string[] }>;
}

export function createAttemptBatches(
  sql: SqlClient,
  leaseMs: number,
  healthRules: HealthRules,
  queryTimeoutMs = DEFAULT_DATABASE_QUERY_TIMEOUT_MS,
): AttemptBatches {
  const claims = batchLoader<{ deliveryId: string; leaseToken: string }, ClaimedDelivery | null>(
    async (requests) => {
      const claimed = await claimDeliveries({ sql }, { claims: [...requests], leaseMs });
      // A delivery two jobs asked for in the same batch goes to the one whose lease it took.
      return requests.map((request) => {
        const delivery = claimed.get(request.deliveryId);
        return delivery?.leaseToken === request.leaseToken ? delivery : null;
      });
    },
    { maxBatchSize: MAX_BATCH, inFlight: BATCHES_IN_FLIGHT },
  );

  const withdrawals = batchLoader<AttemptLease, void>(
    async (leases) => {
      await withdrawAttempts({ sql }, [...leases]);
      return leases.map(() => undefined);
    },
    { maxBatchSize: MAX_BATCH },
  );

  const records = batchLoader<{ record: AttemptToRecord; answerBy: number }, RecordedAttempt | undefined>(
    async (requests) => {
      const answerBy = Math.min(...requests.map((request) => request.answerBy));
      const timeoutMs = Math.min(queryTimeoutMs, Math.max(MIN_RECORD_TIMEOUT_MS, answerBy - Date.now()));
      const recorded = await recordAttempts(
        { sql },
        requests.map((request) => request.record),
        { timeoutMs },
      );
      return requests.map((request) => recorded.get(request.record.deliveryId));
    },
    { maxBatchSize: MAX_BATCH, inFlight: BATCHES_IN_FLIGHT },
  );

  const health = batchLoader<EndpointResult, { update: HealthUpdate | undefined; deliveryIds: string[] }>(
    async (results) => {
      const { updates, deliveryIds } = await recordEndpointResults({ sql }, [...results], healthRules);
      const bySubscription = new Map(updates.map((update) => [update.subscriptionId, update]));
      // Each update, and the operational deliveries, go to one caller only, so that they are
      // counted, logged and enqueued once.
      return results.map((result, index) => {
        const update = bySubscription.get(result.subscriptionId);
        bySubscription.delete(result.subscriptionId);
        return { update, deliveryIds: index === 0 ? deliveryIds : [] };
      });
    },
    { maxBatchSize: MAX_BATCH },
  );

  return {
    claim: (deliveryId, leaseToken) => claims.load({ deliveryId, leaseToken }),
    withdraw: (lease) => withdrawals.load(lease),
    record: (record, answerBy) => records.load({ record, answerBy }),
    recordHealth: (result) => health.load(result),
  };
}
