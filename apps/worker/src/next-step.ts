import type { DeliveryJob } from "@webhooks/core";
import { whyNotClaimed } from "@webhooks/db";
import type { AttemptDeps, NextStep } from "./deliver-attempt.ts";

/**
 * A parked delivery is woken by the gate when its turn comes, and if that wake is lost, by the
 * reconciler once the turn lapses (docs/architecture.md#the-gate). This timer is only the last
 * resort, should both fail. A job whose timer fired while it was still in line is parked again
 * for longer: every waiting delivery's timer fires, so a line of N deliveries costs N / fallback
 * job runs per second, and the timers of deliveries that began to wait together are spread by a
 * fifth either way.
 */
const PARKED_FALLBACK_MS = 15 * 60_000;
const STILL_IN_LINE_FALLBACK_MS = 60 * 60_000;

/**
 * A delivery as the queue holds it: its own job, active in this worker, or a delivery of a
 * dispatch, which gets a job of its own only if it must come back later.
 */
export interface DeliveryJobHandle {
  /** The job's data as it ran. */
  job: DeliveryJob;
  /** Its own job (a resend may have left it a note, see `runIfResent`), not a dispatch's delivery. */
  ownJob: boolean;
  /** Parks the delivery until `at` (epoch ms), its job's data from then on `data` (by default, as it ran). */
  park(at: number, data?: DeliveryJob): Promise<void>;
}

/**
 * What comes after an attempt, for a delivery's own job and a dispatch's delivery alike: the
 * NextStep that deliverAttempt decided (from the delivery state machine and the gate) becomes the
 * job's next state here, and only here. Returns whether the delivery was parked.
 */
export async function applyNextStep(deps: AttemptDeps, handle: DeliveryJobHandle, next: NextStep): Promise<boolean> {
  const { deliveryId } = handle.job;
  switch (next.kind) {
    case "done":
      return false;
    case "wait": {
      // Parked for its retry (or its lease), not for a turn at the gate: its data must not say
      // `waited` any more, or a resend that cannot reach Redis would leave it late for good (the
      // reconciler brings forward only late jobs not waiting at the gate; DeliveryQueue.inspect).
      const { waited: _, ...data } = handle.job;
      await handle.park(Date.now() + next.delayMs, data);
      if (handle.ownJob) await runIfResent(deps, deliveryId);
      return true;
    }
    case "parked": {
      // Out of the worker slot until its turn: a waiting delivery holds no slot.
      const parkedUntil = next.turnAt ?? fallbackAt(next.stillInLine);
      await handle.park(parkedUntil, parkedData(handle.job, next));
      // Its turn may have come while it was being parked, when the waker could not move its job.
      // And if the gate does not know it at all, Redis lost its data between the line and this
      // job: nobody would wake it before its fallback timer, minutes away, so it runs now, and
      // joins the line again if it must wait.
      const place = await deps.gate.placeOf(next.subscriptionId, deliveryId);
      const at = place.turn ?? (place.inLine ? null : Date.now());
      if (at !== null && at < parkedUntil) await deps.queue.wake([{ deliveryId, at }]);
      return true;
    }
  }
}

/** Whether two jobs' data say the same (a job's data is rewritten only when it changes). */
export function sameJobData(a: DeliveryJob, b: DeliveryJob): boolean {
  return (
    a.deliveryId === b.deliveryId && a.subscriptionId === b.subscriptionId && a.waited === b.waited && a.test === b.test
  );
}

/** A parked delivery's job data: marked, and naming its subscription, so that its next run is pre-checked before any claim. */
function parkedData(job: DeliveryJob, next: Extract<NextStep, { kind: "parked" }>): DeliveryJob {
  return {
    deliveryId: job.deliveryId,
    subscriptionId: next.subscriptionId,
    waited: true,
    ...(next.test === true || job.test === true ? { test: true } : {}),
  };
}

function fallbackAt(stillInLine: boolean): number {
  const base = stillInLine ? STILL_IN_LINE_FALLBACK_MS : PARKED_FALLBACK_MS;
  return Date.now() + Math.round(base * (0.8 + Math.random() * 0.4));
}

/**
 * A manual resend that came while this job was ending its attempt could not promote the job, then
 * active, and left a note (DeliveryQueue.enqueueResend). If the delivery is due now, the resend
 * came after this attempt's record, and the job just parked until the next retry runs now
 * instead. If not, the attempt began after the resend and was its attempt: the retry's time stands.
 * Never thrown: the job is parked already, and a failure here only leaves it at the retry's time.
 */
async function runIfResent(deps: AttemptDeps, deliveryId: string): Promise<void> {
  try {
    if (!(await deps.queue.takeResendNote(deliveryId))) return;
    const why = await whyNotClaimed({ sql: deps.sql }, deliveryId);
    if (why.reason !== "not_due" || why.retryInMs > 0) return;
    // The API's own second look may have promoted it already.
    await deps.queue.promote([deliveryId]);
  } catch (error) {
    deps.logger.warn(
      { err: error, deliveryId },
      "could not run a resent delivery at once; it runs at its retry's time",
    );
  }
}
