import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { type DeliveryStatus, isSuccess, type Tracing } from "@webhooks/core";
import type { ClaimedDelivery } from "@webhooks/db";
import type { SendResult } from "./http-sender.ts";

/** What tracing adds to one attempt: the headers it sends, and its span to end. */
export interface AttemptTrace {
  /** `traceparent`, when SEND_TRACEPARENT is on and there is a trace to name; otherwise empty. */
  headers: Record<string, string>;
  /** The attempt ended with this result (and the delivery's state after it). */
  finished(result: SendResult, status: DeliveryStatus): void;
  /** The attempt ended without a result: it was taken back, or failed before its request left. */
  failed(error: unknown): void;
}

const UNTRACED: AttemptTrace = { headers: {}, finished() {}, failed() {} };

/**
 * The span `webhook.attempt` of one attempt (docs/operations.md#tracing), a child of the span of
 * the request that published the delivery's event: its traceparent is stored with the event, so
 * the attempt joins that trace whatever became of the queue, the worker or Redis since. Without
 * tracing, nothing is made; SEND_TRACEPARENT then passes the stored traceparent on as it is.
 */
export function startAttemptSpan(
  tracing: Tracing | undefined,
  sendTraceparent: boolean,
  delivery: ClaimedDelivery,
): AttemptTrace {
  if (tracing === undefined) {
    if (!sendTraceparent || delivery.traceparent === null) return UNTRACED;
    return { ...UNTRACED, headers: { traceparent: delivery.traceparent } };
  }
  const span = tracing.tracer.startSpan(
    "webhook.attempt",
    {
      kind: SpanKind.CLIENT,
      attributes: {
        "webhook.delivery_id": delivery.deliveryId,
        "webhook.subscription_id": delivery.subscriptionId,
        "webhook.event_type": delivery.eventType,
        "webhook.event_id": delivery.eventId,
        "webhook.attempt": delivery.attempt.number,
        "http.request.method": "POST",
        "server.address": hostOf(delivery.url),
      },
    },
    tracing.contextOf(delivery.traceparent),
  );
  const traceparent = sendTraceparent ? tracing.traceparentOf(span) : undefined;
  let ended = false;
  return {
    headers: traceparent === undefined ? {} : { traceparent },
    finished(result, status) {
      if (ended) return;
      ended = true;
      if (result.responseCode !== null) span.setAttribute("http.response.status_code", result.responseCode);
      span.setAttribute("webhook.delivery.status", status);
      if (!isSuccess(result)) {
        const why = result.responseCode === null ? (result.error ?? "no response") : `HTTP ${result.responseCode}`;
        span.setAttribute("error.type", result.responseCode === null ? "no_response" : String(result.responseCode));
        span.setStatus({ code: SpanStatusCode.ERROR, message: why });
      }
      span.end();
    },
    failed(error) {
      if (ended) return;
      ended = true;
      if (error instanceof Error) span.recordException(error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      span.end();
    },
  };
}

function hostOf(url: string): string {
  try {
    return new URL(url).hostname;
  } catch {
    return "";
  }
}
