import { type Logger, withDeadline } from "@webhooks/core";
import { bringProbeForward } from "@webhooks/db";
import type { ApiDeps } from "../http/types.ts";

/** How long the gate may take to let the delivery go before the request answers without it. */
const GATE_TIMEOUT_MS = 2_000;

/**
 * A manual resend, a recover or a test event is its owner saying the endpoint may be back: when
 * the subscription's circuit is open, that delivery goes at once as the probe rather than
 * waiting for the next one (docs/api.md#circuit-breaker). The probe is brought
 * forward in PostgreSQL (never before the end of a Retry-After the endpoint asked for), then the
 * gate lets the delivery go as it. Call it before the delivery is enqueued, so that its job finds
 * its turn. A failure is logged, never the request's: the delivery then waits for the next
 * probe, as it would have before.
 */
export async function probeWithExplicitAction(
  deps: Pick<ApiDeps, "pool" | "gate" | "queue">,
  logger: Logger,
  subscriptionId: string,
  deliveryId: string,
): Promise<void> {
  try {
    const probeAt = await bringProbeForward({ sql: deps.pool }, subscriptionId);
    if (probeAt === null) return;
    await withDeadline(
      deps.gate.probeNow(subscriptionId, deliveryId, probeAt.getTime()).then((wakes) => deps.queue.wake(wakes)),
      GATE_TIMEOUT_MS,
      "Redis",
    );
  } catch (error) {
    logger.warn(
      { err: error, subscriptionId, deliveryId },
      "could not send the delivery as the open circuit's probe; it waits for the next probe",
    );
  }
}
