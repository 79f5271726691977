import type { DeliveryStatus } from "./delivery-status.ts";
import { decideRetry } from "./retry-schedule.ts";

/**
 * The delivery state machine (docs/architecture.md#the-delivery-state-machine), in one place. Every
 * writer of a delivery's `status` and `next_attempt_at` takes the values from here; the SQL only
 * stores them.
 *
 * What is stored is `status` plus `next_attempt_at`, which means "when the next attempt may start":
 *
 * | state            | status    | next_attempt_at        | API next_retry_at |
 * |------------------|-----------|------------------------|-------------------|
 * | queued           | queued    | when it became due     | null              |
 * | retry_scheduled  | failed    | the retry time         | = next_attempt_at |
 * | delivered        | delivered | null                   | null              |
 * | failed           | failed    | null (nothing planned) | null              |
 *
 * Two states are not stored as a status, because a delivery in them keeps its
 * status and attempts as they are:
 * - attempting: a worker holds the lease and has recorded an attempt as started (`open_attempt_id`).
 * - waiting: due, but held back by its destination: the subscription's max_in_flight, the
 *   origin's cap, its rate_limit, a Retry-After, an open circuit, or the subscription having been
 *   disabled by the service. Waiting spends no attempt and holds no worker slot (the gate in
 *   packages/queue parks it), and the stored state does not change.
 */
export type DeliveryState = "queued" | "retry_scheduled" | "delivered" | "failed";

/** Why a due delivery is waiting instead of being attempted. */
export type WaitReason =
  | "max_in_flight"
  | "origin_max_in_flight"
  | "rate_limit"
  | "retry_after"
  | "circuit_open"
  | "disabled";

/** What is written for a delivery: its status, and when its next attempt may start (null: never). */
export interface StoredState {
  status: DeliveryStatus;
  /** Milliseconds from now until the next attempt may start; null when none is planned. */
  nextAttemptInMs: number | null;
}

/** How an attempt ended, as the sender saw it. */
export interface AttemptResult {
  /** The response's status, or null when none arrived (timeout, connection error). */
  responseCode: number | null;
  /** The response's Retry-After header, if any. */
  retryAfter?: string | null;
}

export type DeliveryEvent =
  /** An attempt ended; `attemptNumber` is 1 for the first. */
  | { type: "attempt_finished"; attemptNumber: number; result: AttemptResult }
  /** A manual resend (POST /v1/deliveries/{id}/retry). */
  | { type: "resend" };

export interface LifecycleRules {
  retryScheduleMs: readonly number[];
  now?: Date;
  random?: () => number;
}

/** A new delivery is queued and due at once. */
export const INITIAL_STATE: StoredState = { status: "queued", nextAttemptInMs: 0 };

/** Success is a 2xx; a 3xx is not followed and is a failure like any other (docs/api.md#retry-schedule). */
export function isSuccess(result: AttemptResult): boolean {
  return result.responseCode !== null && result.responseCode >= 200 && result.responseCode < 300;
}

/** The state from its stored columns. */
export function stateOf(status: DeliveryStatus, nextAttemptAt: Date | null): DeliveryState {
  if (status === "delivered") return "delivered";
  if (status === "queued") return "queued";
  return nextAttemptAt === null ? "failed" : "retry_scheduled";
}

/**
 * The one transition function. Throws on a transition the API does not allow, so that a
 * writer cannot store one by mistake.
 */
export function nextState(state: DeliveryState, event: DeliveryEvent, rules: LifecycleRules): StoredState {
  switch (event.type) {
    case "attempt_finished": {
      // An attempt starts only from a due delivery: queued, or failed with its retry come due.
      if (state !== "queued" && state !== "retry_scheduled") throw new IllegalTransition(state, event.type);
      if (isSuccess(event.result)) return { status: "delivered", nextAttemptInMs: null };
      const decision = decideRetry(
        {
          attemptNumber: event.attemptNumber,
          responseCode: event.result.responseCode,
          retryAfter: event.result.retryAfter ?? null,
        },
        rules.retryScheduleMs,
        rules.now,
        rules.random,
      );
      return { status: "failed", nextAttemptInMs: decision.retry ? decision.delayMs : null };
    }
    case "resend":
      // Delivered, failed for good, or waiting for a retry (resent before its time): queued and due
      // now. A queued delivery is about to be attempted anyway; it stays as it is (the writer
      // leaves its row alone, so its next_attempt_at is not moved).
      return { status: "queued", nextAttemptInMs: 0 };
  }
}

export class IllegalTransition extends Error {
  constructor(state: DeliveryState, event: DeliveryEvent["type"]) {
    super(`a delivery in state ${state} cannot take the event ${event}`);
    this.name = "IllegalTransition";
  }
}

/**
 * The `error` of an attempt whose worker stopped (crashed, killed, or lost its lease) after the
 * request may have left and before its outcome was recorded: the receiver may or may not have had
 * it, so it counts as an attempt (docs/api.md#delivery-states: the log counts every request a
 * receiver may have seen).
 */
export const UNKNOWN_OUTCOME_ERROR =
  "outcome unknown: the worker stopped before recording a response (the request may have been received)";
