import { randomUUID } from "node:crypto";
import { decideRetry, signWebhook, type Logger } from "@webhooks/core";
import { whyNotClaimed, type AttemptOutcome, type ClaimedDelivery, type SqlClient } from "@webhooks/db";
import type { AttemptBatches } from "./attempt-batches.ts";
import type { HttpSender, SendResult } from "./http-sender.ts";
import type { WorkerMetrics } from "./metrics.ts";
import type { SecretKeys } from "./secret-keys.ts";

export interface AttemptDeps {
  sql: SqlClient;
  batches: AttemptBatches;
  sender: HttpSender;
  secretKeys: SecretKeys;
  metrics: WorkerMetrics;
  logger: Logger;
  retryScheduleMs: number[];
  deliveryTimeoutMs: number;
}

/** What the queue should do with the job after an attempt. */
export type NextStep = { kind: "done" } | { kind: "wait"; delayMs: number };

/**
 * One attempt of one delivery: claim it, POST the signed webhook to the delivery's own snapshot
 * of url and secret (contract §8), then record the attempt and the new state together.
 */
export async function deliverAttempt(deps: AttemptDeps, deliveryId: string): Promise<NextStep> {
  const leaseToken = randomUUID();
  const delivery = await deps.batches.claim(deliveryId, leaseToken);
  if (!delivery) {
    const why = await whyNotClaimed({ sql: deps.sql }, deliveryId);
    // Woken early, or another worker holds the delivery: come back when it may be ours.
    if (why.reason === "not_due" || why.reason === "leased") return { kind: "wait", delayMs: why.retryInMs + 100 };
    // Nothing left to do: already delivered, or failed for good.
    return { kind: "done" };
  }

  const startedAt = new Date();
  const body = webhookBody(delivery);
  const headers = signWebhook({
    secretKey: deps.secretKeys.get(delivery.secretId, delivery.secretCiphertext),
    messageId: delivery.eventId,
    timestamp: startedAt,
    body,
  });
  const result = await deps.sender.send(delivery.url, { ...headers }, body);
  const outcome = decideOutcome(result, startedAt, delivery.attemptsMade + 1, deps.retryScheduleMs);

  const recorded = await deps.batches.record({ deliveryId, leaseToken, outcome });
  deps.metrics.attemptDuration.observe(result.durationMs / 1000);
  if (!recorded) {
    // Our lease expired and another worker took over; its record stands.
    deps.logger.warn({ deliveryId }, "attempt made but not recorded: the lease was lost");
    return { kind: "done" };
  }
  deps.metrics.attempts.inc({ outcome: outcome.status === "delivered" ? "delivered" : outcome.retryInMs === null ? "failed" : "retry_scheduled" });
  deps.logger.debug(
    { deliveryId, attempt: delivery.attemptsMade + 1, responseCode: result.responseCode, error: result.error, status: outcome.status },
    "attempt recorded",
  );
  return outcome.retryInMs === null ? { kind: "done" } : { kind: "wait", delayMs: outcome.retryInMs };
}

/** Contract §9: `{"type","timestamp","data"}`; data goes out exactly as PostgreSQL stores it. */
function webhookBody(delivery: ClaimedDelivery): string {
  return `{"type":${JSON.stringify(delivery.eventType)},"timestamp":${JSON.stringify(delivery.eventCreatedAt.toISOString())},"data":${delivery.eventDataJson}}`;
}

/** Contract §5: a 2xx delivers; anything else fails, with a retry while the schedule allows. */
export function decideOutcome(result: SendResult, startedAt: Date, attemptNumber: number, scheduleMs: number[]): AttemptOutcome {
  const common = {
    startedAt,
    durationMs: result.durationMs,
    responseCode: result.responseCode,
    responseBody: result.responseBody,
    error: result.error,
  };
  if (result.responseCode !== null && result.responseCode >= 200 && result.responseCode < 300) {
    return { ...common, status: "delivered", retryInMs: null };
  }
  const decision = decideRetry({ attemptNumber, responseCode: result.responseCode, retryAfter: result.retryAfter }, scheduleMs);
  return { ...common, status: "failed", retryInMs: decision.retry ? decision.delayMs : null };
}
