import { z } from "@hono/zod-openapi";
import { DEFAULT_STATS_RANGE_MS, MAX_STATS_RANGE_MS, type SubscriptionStats } from "@webhooks/db";
import { ApiError } from "../http/api-error.ts";
import { isoTimestamp, timestampQuery } from "../http/schemas.ts";

export const subscriptionStatsQuery = z.strictObject({
  since: timestampQuery("since", "The start of the window (inclusive). Default: 24 hours before until."),
  until: timestampQuery("until", "The end of the window (exclusive). Default: the time of the request."),
});

/**
 * The window asked for, with its defaults (docs/api.md#subscription-stats): later than since, and
 * at most 31 days long. A 400 naming the parameter otherwise.
 */
export function statsWindow(query: { since?: Date | undefined; until?: Date | undefined }, now: Date) {
  const until = query.until ?? now;
  const since = query.since ?? new Date(until.getTime() - DEFAULT_STATS_RANGE_MS);
  const untilIs = query.until === undefined ? "until, which is the time of the request when not sent" : "until";
  if (until <= since) {
    const [param, message] =
      query.until === undefined
        ? ["since", `since must be earlier than ${untilIs}`]
        : ["until", "until must be later than since"];
    throw new ApiError(400, "invalid_request_error", "parameter_invalid", message, param);
  }
  if (until.getTime() - since.getTime() > MAX_STATS_RANGE_MS) {
    const message = `since must be at most 31 days before ${untilIs}`;
    throw new ApiError(400, "invalid_request_error", "parameter_out_of_range", message, "since");
  }
  return { since, until };
}

const count = (description: string) => z.number().int().openapi({ description });
const latency = (description: string) =>
  z
    .number()
    .int()
    .nullable()
    .openapi({ description: `${description} Null when no attempt got a response.` });

export const subscriptionStatsSchema = z
  .object({
    object: z.literal("subscription_stats"),
    subscription_id: z.string().openapi({ example: "sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" }),
    since: z.string().openapi({ format: "date-time", description: "The start of the window (inclusive)." }),
    until: z.string().openapi({ format: "date-time", description: "The end of the window (exclusive)." }),
    deliveries: z
      .object({
        queued: count("Deliveries created in the window that are queued now."),
        delivered: count("Deliveries created in the window that are delivered now."),
        failed: count("Deliveries created in the window that are failed now (for good, or waiting for a retry)."),
      })
      .openapi({ description: "The deliveries created in the window, by their status now." }),
    attempts: z
      .object({
        total: count(
          "Every attempt that ended. One whose outcome is unknown (its worker stopped mid-request) is in no class.",
        ),
        "2xx": count("Attempts answered with a 2xx status."),
        "3xx": count("Attempts answered with a 3xx status."),
        "4xx": count("Attempts answered with a 4xx status."),
        "5xx": count("Attempts answered with a 5xx status."),
        timeout: count("Attempts whose time (DELIVERY_TIMEOUT) ran out before a response."),
        network_error: count(
          "Attempts that got no response for another reason: connection refused or reset, DNS, TLS, a destination " +
            "refused by the egress rules, a failed token request.",
        ),
      })
      .openapi({ description: "The attempts started in the window, by what they got." }),
    latency_ms: z
      .object({
        p50: latency("Median time to a response, in milliseconds."),
        p95: latency("95th percentile, in milliseconds."),
        p99: latency("99th percentile, in milliseconds."),
      })
      .openapi({ description: "Of the attempts started in the window that got a response (any status)." }),
    series: z
      .array(
        z.object({
          start: z.string().openapi({ format: "date-time", description: "The start of the UTC hour or day." }),
          delivered: count("Deliveries created in it that are delivered now."),
          failed: count("Deliveries created in it that are failed now."),
        }),
      )
      .openapi({
        description:
          "Every UTC hour the window touches (every UTC day when it is longer than 48 hours), oldest first, " +
          "empty ones included.",
      }),
  })
  .openapi("SubscriptionStats");

export function toSubscriptionStatsJson(stats: SubscriptionStats) {
  const { networkError, ...classes } = stats.attempts;
  return {
    object: "subscription_stats" as const,
    subscription_id: stats.subscriptionId,
    since: isoTimestamp(stats.since),
    until: isoTimestamp(stats.until),
    deliveries: stats.deliveries,
    attempts: { ...classes, network_error: networkError },
    latency_ms: stats.latencyMs,
    series: stats.series.map((point) => ({
      start: isoTimestamp(point.start),
      delivered: point.delivered,
      failed: point.failed,
    })),
  };
}

// The route's types, for the tests and any TypeScript caller.
export type SubscriptionStatsQuery = z.input<typeof subscriptionStatsQuery>;
export type SubscriptionStatsResponse = z.output<typeof subscriptionStatsSchema>;
