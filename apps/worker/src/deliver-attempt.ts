import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import {
  changesHealth,
  type DeliveryJob,
  type EndpointHealth,
  heldUntil,
  type IsolationConfig,
  isSuccess,
  type Logger,
  mergeRequestHeaders,
  nextState,
  signWebhook,
  stateOf,
  type Tracing,
} from "@webhooks/core";
import {
  type AttemptToRecord,
  type ClaimedDelivery,
  endDeliveriesWithoutPayload,
  isDatabaseUnreachable,
  nextInLine,
  type RecordedAttempt,
  recordedAttempt,
  type SqlClient,
  whyNotClaimed,
} from "@webhooks/db";
import {
  type DeliveryGate,
  type DeliveryQueue,
  type GateInput,
  gateLimits,
  type ReleaseInput,
  type Wake,
} from "@webhooks/queue";
import type { AttemptBatches } from "./attempt-batches.ts";
import { startAttemptSpan } from "./attempt-span.ts";
import type { HttpSender, SendResult } from "./http-sender.ts";
import type { WorkerMetrics } from "./metrics.ts";
import type { SecretKeys } from "./secret-keys.ts";
import type { WorkerState } from "./worker-state.ts";

export interface AttemptDeps {
  sql: SqlClient;
  batches: AttemptBatches;
  gate: DeliveryGate;
  queue: DeliveryQueue;
  sender: HttpSender;
  secretKeys: SecretKeys;
  metrics: WorkerMetrics;
  logger: Logger;
  retryScheduleMs: number[];
  isolation: IsolationConfig;
  /** How long a claim, and a slot at the gate, last if their holder dies. */
  leaseMs: number;
  /** What the process keeps across attempts. */
  state: WorkerState;
  /** The OpenTelemetry SDK when traces are exported; undefined when off (docs/operations.md#tracing). */
  tracing: Tracing | undefined;
  /** SEND_TRACEPARENT: attempts carry a `traceparent` header. */
  sendTraceparent: boolean;
}

/** What the queue should do with the job after this. */
export type NextStep =
  | { kind: "done" }
  /** Come back after this long (a retry, or a delivery that was not due yet). */
  | { kind: "wait"; delayMs: number }
  /**
   * Waiting in its subscription's line at the gate: park the job until its turn (`turnAt` if
   * known). `stillInLine`: it was in line already when its job ran (its fallback timer fired).
   */
  | { kind: "parked"; subscriptionId: string; turnAt: number | null; stillInLine: boolean; test?: boolean };

/**
 * One attempt of one delivery, in the order it happens:
 * 0. pre-check, when the job names the subscription: if others wait ahead, it is at its cap or
 *    it was found disabled, the delivery joins the line at once (or stays in it), without
 *    touching the database;
 * 1. claim: a lease on the delivery, its snapshot, and its subscription as it is now; the attempt
 *    is in the log as begun before its request can leave (and an attempt an earlier worker began
 *    and never recorded is closed, as one of unknown outcome);
 * 2. gate: may it start now, within its destination's limits? If not, the attempt is taken back
 *    and the delivery waits, unspent;
 * 3. sign with the subscription's secrets (both during a rotation's overlap) and send to the
 *    delivery's own snapshot of url, custom headers and endpoint credentials
 *    (docs/api.md#updates-apply-to-the-next-delivery);
 * 4. decide the delivery's next state (core's lifecycle);
 * 5. record the outcome (tried again while PostgreSQL is out of reach and the lease lasts), and
 *    the endpoint's health (which may open or close its circuit);
 * 6. release the gate's slot, waking whoever may go next (nobody, if the health just written
 *    holds the subscription: they would be claimed only to be taken back), enqueue the next of an
 *    ordered line once this one is finished, and schedule what comes next. After a success of an
 *    unordered subscription nothing held, the slot goes back as soon as the request has ended,
 *    before steps 4 and 5: that outcome cannot hold anyone.
 */
export async function deliverAttempt(deps: AttemptDeps, job: DeliveryJob): Promise<NextStep> {
  const { deliveryId, subscriptionId, waited = false } = job;
  // 0. Pre-check, for deliveries that waited before (a parked job's fallback timer may fire while
  // it is still in line) and for subscriptions this worker saw waiting lately (others have no line
  // to join). Not for a test, which goes ahead of the line (GateInput.test).
  if (subscriptionId !== undefined && job.test !== true && (waited || deps.state.waiting.has(subscriptionId))) {
    const precheck = await deps.gate.precheck(subscriptionId, deliveryId);
    if (precheck !== "go") {
      deps.state.waiting.note(subscriptionId);
      deps.metrics.waits.inc({ reason: "in_line" });
      return { kind: "parked", subscriptionId, turnAt: null, stillInLine: precheck === "stays" };
    }
  }

  // 1. Claim, and begin the attempt. The lease runs from the claim's statement: it ends no sooner than this.
  const leaseToken = randomUUID();
  const leaseEndsAt = Date.now() + deps.leaseMs;
  const delivery = await deps.batches.claim(deliveryId, leaseToken);
  if (!delivery) {
    const why = await whyNotClaimed({ sql: deps.sql }, deliveryId);
    // Woken early, or another worker holds the delivery: come back when it may be ours.
    if (why.reason === "not_due" || why.reason === "leased") return { kind: "wait", delayMs: why.retryInMs + 100 };
    // Nothing left to do: already delivered, or failed for good. Or behind others in its ordered
    // line: it needs no job until its turn, when the one before it enqueues it (or the reconciler).
    return { kind: "done" };
  }

  if (delivery.closedAbandonedAttempt) deps.metrics.attempts.inc({ outcome: "unknown" });
  const { attempt } = delivery;
  const lease = { deliveryId, leaseToken, attempt };
  // The event's payload was erased since the delivery was queued: nothing to send, so it ends
  // failed without an attempt (docs/api.md#erase-an-events-payload).
  if (delivery.eventDataJson === null) {
    await endDeliveriesWithoutPayload({ sql: deps.sql }, [lease]);
    deps.logger.info({ deliveryId }, "delivery ended: its event's payload was erased");
    return { kind: "done" };
  }
  const eventDataJson = delivery.eventDataJson;

  // 2. Gate.
  const gateInput = toGateInput(delivery, waited, deps);
  const decision = await deps.gate.acquire(gateInput).catch(async (error: unknown) => {
    // Redis failed us: nothing was sent, so the attempt must not count (the job is tried again).
    await deps.batches.withdraw(lease).catch(() => {});
    throw error;
  });
  if (!decision.go) {
    deps.state.waiting.note(delivery.subscriptionId);
    await deps.batches.withdraw(lease);
    deps.metrics.waits.inc({ reason: decision.reason });
    await wake(
      deps,
      decision.wakes.filter((w) => w.deliveryId !== deliveryId),
    );
    const ownTurn = decision.wakes.find((w) => w.deliveryId === deliveryId);
    return {
      kind: "parked",
      subscriptionId: delivery.subscriptionId,
      turnAt: ownTurn?.at ?? null,
      stillInLine: false,
      test: delivery.test,
    };
  }
  await wake(deps, decision.wakes);
  // The attempt's span, in the trace of the request that published its event.
  const attemptTrace = startAttemptSpan(deps.tracing, deps.sendTraceparent, delivery);

  // For the release: until when the subscription is held as this attempt's outcome tells
  // (null: not held; undefined: it cannot tell). A success clears the gate's hold even when its
  // health write was skipped: a hold the gate keeps wrongly would slow the line down.
  let holdUntil: number | null | undefined;
  // The release, once started. It starts as soon as the request has ended when that outcome
  // cannot hold the subscription (`releasesEarly`): whoever it wakes (the next of the line, another
  // subscription's delivery waiting for room at the origin) need not wait for this record.
  let released: Promise<void> | undefined;
  // Whether the request may have left: until then, a failure (Redis failing the pacing, a secret
  // that does not decrypt) takes the attempt back, as the gate's own failure does above.
  let sending = false;
  try {
    // 3. Sign and send (paced, for a rate-limited subscription).
    const rateLimit = delivery.subscription.rateLimit;
    if (rateLimit !== null) await paceSend(deps, delivery.subscriptionId, rateLimit, deliveryId);
    const body = webhookBody(delivery, eventDataJson);
    const signed = signWebhook({
      secretKeys: delivery.secrets.map((secret) => deps.secretKeys.get(secret.id, secret.ciphertext)),
      messageId: delivery.eventId,
      // The attempt's start, as the log records it: what was sent can be shown exactly
      // (docs/api.md#list-a-deliverys-attempts).
      timestamp: attempt.startedAt,
      body,
    });
    // The custom headers go under the signature headers; reserved names (content-type, user-agent, ...) are dropped.
    const headers = mergeRequestHeaders(delivery.headers, { ...signed, ...attemptTrace.headers });
    sending = true;
    const result = await deps.sender.send(delivery.url, headers, body, delivery.credentials);
    deps.metrics.attemptDuration.observe(result.durationMs / 1000);
    if (releasesEarly(delivery, result)) released = releaseSlot(deps, { ...gateInput, holdUntil: null });

    // 4. Decide.
    const next = nextState(
      stateOf(delivery.status, delivery.nextAttemptAt),
      { type: "attempt_finished", attemptNumber: attempt.number, result },
      { retryScheduleMs: deps.retryScheduleMs },
    );

    // 5. Record.
    const recorded = await recordOutcome(
      deps,
      { ...lease, outcome: { ...pick(result), status: next.status, nextAttemptInMs: next.nextAttemptInMs } },
      leaseEndsAt,
    );
    attemptTrace.finished(result, next.status);
    if (!recorded) {
      // Our lease expired and another worker took over, closing this attempt as unknown.
      deps.logger.warn({ deliveryId }, "attempt made but not recorded: the lease was lost");
      return { kind: "done" };
    }
    deps.metrics.attempts.inc({
      outcome: next.status === "delivered" ? "delivered" : next.nextAttemptInMs === null ? "failed" : "retry_scheduled",
    });
    deps.logger.debug(
      {
        deliveryId,
        attempt: attempt.number,
        responseCode: result.responseCode,
        error: result.error,
        status: next.status,
      },
      "attempt recorded",
    );
    const health = await recordHealth(deps, delivery, result, recorded.subscriptionUnwell);
    if (health) holdUntil = heldUntil(health, new Date())?.getTime() ?? null;
    else if (isSuccess(result)) holdUntil = null;

    // 6. Schedule (the slot is released below). A retry holds the line behind it; an end lets it move.
    if (next.nextAttemptInMs !== null) return { kind: "wait", delayMs: next.nextAttemptInMs };
    if (delivery.ordered) await enqueueNextInLine(deps, delivery.subscriptionId);
    return { kind: "done" };
  } catch (error) {
    // Nothing was sent: the attempt must not count, nor show in the log as one of unknown
    // outcome once its lease expires (the job is tried again). Once the request may have left,
    // the open attempt stays, and is closed as unknown if nobody records it.
    if (!sending) await deps.batches.withdraw(lease).catch(() => {});
    attemptTrace.failed(error);
    throw error;
  } finally {
    // Otherwise after the record, so that whoever this wakes sees the outcome (a probe's success closes the circuit).
    await (released ?? releaseSlot(deps, { ...gateInput, holdUntil }));
  }
}

/** The first wait before a record that could not reach PostgreSQL is tried again; it doubles, up to the second. */
const RECORD_RETRY_MS = 100;
const MAX_RECORD_RETRY_MS = 1_000;

/**
 * Step 5's record. The request has left: an outcome given up on would leave the attempt open, and
 * the delivery would be sent again once its lease expired. So while PostgreSQL cannot be reached
 * (connections cut or gone silent, no free connection in the pool), the record is tried again,
 * until the lease ends (docs/architecture.md#leases-and-at-least-once-delivery); then the error
 * goes up, and the job is parked as for any outage. Each try must be answered within a quarter of
 * the lease's time left: one that met a connection gone silent leaves the rest to tries on other
 * connections (the pool may hold several that went silent together), where waiting out
 * DATABASE_QUERY_TIMEOUT (longer than the lease by default) would let the lease expire. A try that
 * failed may still have committed, its answer lost with its connection: when a later one finds the
 * lease no longer held, the log says whether the outcome is in it.
 */
async function recordOutcome(
  deps: AttemptDeps,
  record: AttemptToRecord,
  leaseEndsAt: number,
): Promise<RecordedAttempt | undefined> {
  let failedBefore = false;
  for (let waitMs = RECORD_RETRY_MS; ; waitMs = Math.min(waitMs * 2, MAX_RECORD_RETRY_MS)) {
    try {
      const recorded = await deps.batches.record(record, Date.now() + (leaseEndsAt - Date.now()) / 4);
      if (recorded || !failedBefore) return recorded;
      return await recordedAttempt({ sql: deps.sql }, record.attempt.id);
    } catch (error) {
      if (!isDatabaseUnreachable(error) || Date.now() + waitMs >= leaseEndsAt) throw error;
      failedBefore = true;
      await sleep(waitMs);
    }
  }
}

/**
 * Whether the attempt's slot may go back before its outcome is recorded: a success, of an
 * unordered subscription that nothing held when it was claimed (no open circuit, no hold, not
 * disabled); the next of an ordered line waits for this one's record anyway.
 * Its record and health write cannot hold the subscription then, so whoever the release wakes
 * claims the subscription as it will be; after a probe, or a failure, they must see the outcome.
 */
function releasesEarly(delivery: ClaimedDelivery, result: SendResult): boolean {
  const { health } = delivery.subscription;
  return (
    isSuccess(result) &&
    !delivery.ordered &&
    health.circuitOpenedAt === null &&
    health.heldUntil === null &&
    health.disabledReason === null
  );
}

/** Releases the attempt's slot at the gate and wakes whom that makes room for. Never throws. */
async function releaseSlot(deps: AttemptDeps, input: ReleaseInput): Promise<void> {
  const wakes = await deps.gate.release(input).catch((error: unknown) => {
    deps.logger.warn(
      { err: error, deliveryId: input.deliveryId },
      "could not release the gate slot; it expires with the lease",
    );
    return [] as Wake[];
  });
  await wake(deps, wakes);
}

/** The receiver never sees more than rate_limit requests in a second (docs/api.md#endpoint-limits). */
async function paceSend(
  deps: AttemptDeps,
  subscriptionId: string,
  rateLimit: number,
  deliveryId: string,
): Promise<void> {
  for (;;) {
    const waitMs = await deps.gate.pace(subscriptionId, rateLimit, deliveryId);
    if (waitMs <= 0) return;
    await new Promise((resolve) => setTimeout(resolve, waitMs));
  }
}

function toGateInput(delivery: ClaimedDelivery, waited: boolean, deps: AttemptDeps): GateInput {
  const { health, deleted } = delivery.subscription;
  return {
    ...gateLimits({ id: delivery.subscriptionId, url: delivery.url, ...delivery.subscription }, deps.isolation),
    deliveryId: delivery.deliveryId,
    heldUntil: health.heldUntil?.getTime() ?? null,
    circuitOpen: health.circuitOpenedAt !== null,
    probeIntervalMs: deps.isolation.circuitProbeIntervalMs,
    // A disabled subscription's deliveries wait until it is enabled again; once it is deleted,
    // it never will be, so they go out as every deleted subscription's do. A test goes whatever
    // the subscription's state (see GateInput.test).
    disabled: health.disabledReason !== null && !deleted && !delivery.test,
    leaseMs: deps.leaseMs,
    waited,
    test: delivery.test,
  };
}

/**
 * The endpoint's health: written only when this attempt changes it (see core's changesHealth),
 * or when the stored health is unwell (`storedUnwell`, read by the record): the claim's snapshot
 * may predate failures, an open circuit or a hold recorded since, which a success must clear.
 * Returns the health as written, when this attempt's write is the one that reports it.
 */
async function recordHealth(
  deps: AttemptDeps,
  delivery: ClaimedDelivery,
  result: SendResult,
  storedUnwell: boolean,
): Promise<EndpointHealth | undefined> {
  const finishedAt = new Date();
  const snapshot = delivery.subscription.health;
  const written = deps.state.successWritten.get(delivery.subscriptionId);
  const health =
    written && (snapshot.lastSuccessAt === null || written > snapshot.lastSuccessAt)
      ? { ...snapshot, lastSuccessAt: written }
      : snapshot;
  if (!storedUnwell && !changesHealth(health, result, finishedAt)) return undefined;
  try {
    const { update, deliveryIds } = await deps.batches.recordHealth({
      subscriptionId: delivery.subscriptionId,
      result,
      finishedAt,
    });
    if (isSuccess(result)) deps.state.successWritten.set(delivery.subscriptionId, finishedAt);
    for (const change of update?.changes ?? []) {
      deps.metrics.healthChanges.inc({ change });
      const level = change === "circuit_closed" ? "info" : "warn";
      deps.logger[level](
        { subscriptionId: delivery.subscriptionId, change, responseCode: result.responseCode, error: result.error },
        `subscription ${change.replace("_", " ")}`,
      );
    }
    if (deliveryIds.length > 0) await deps.queue.enqueue(deliveryIds);
    return update?.health;
  } catch (error) {
    // The attempt itself is recorded; health is advisory and the next attempt updates it again.
    // Operational deliveries already committed are enqueued by the reconciler.
    deps.logger.warn({ err: error, subscriptionId: delivery.subscriptionId }, "could not record the endpoint's health");
    return undefined;
  }
}

/**
 * The next delivery of an ordered line, once the one before it is finished
 * (docs/api.md#ordered-delivery). If this fails, or the process dies first, the reconciler's next
 * pass finds the line's head without a job and enqueues it.
 */
async function enqueueNextInLine(deps: AttemptDeps, subscriptionId: string): Promise<void> {
  try {
    await deps.queue.enqueue(await nextInLine({ sql: deps.sql }, [subscriptionId]));
  } catch (error) {
    deps.logger.warn(
      { err: error, subscriptionId },
      "could not enqueue the next delivery in line; the reconciler will",
    );
  }
}

async function wake(deps: AttemptDeps, wakes: Wake[]): Promise<void> {
  if (wakes.length === 0) return;
  try {
    await deps.queue.wake(wakes);
  } catch (error) {
    // Their turns lapse untaken, and the reconciler's next pass wakes them (see the gate).
    deps.logger.warn({ err: error, wakes: wakes.length }, "could not wake waiting deliveries");
  }
}

function pick(result: SendResult) {
  return {
    durationMs: result.durationMs,
    responseCode: result.responseCode,
    responseBody: result.responseBody,
    error: result.error,
    timedOut: result.timedOut,
  };
}

/** `{"type","timestamp","data"}` (docs/receiving.md#the-request); data goes out exactly as PostgreSQL stores it. */
function webhookBody(delivery: ClaimedDelivery, dataJson: string): string {
  return `{"type":${JSON.stringify(delivery.eventType)},"timestamp":${JSON.stringify(delivery.eventCreatedAt.toISOString())},"data":${dataJson}}`;
}
