import { z } from "zod";

/** The wildcard a subscription lists to receive every event type. */
export const ALL_EVENT_TYPES = "*";

/**
 * Event type names look like `invoice.paid`: letters, digits and `_ - . :`, up to 255 characters,
 * so they are safe to show, log and filter on.
 */
export const eventTypeSchema = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[A-Za-z0-9_\-.:]+$/, "must contain only letters, digits and _ - . :");

/** A subscription's `events`: a non-empty list of type names, or `*` for every type. */
export const subscribedEventsSchema = z
  .array(z.union([z.literal(ALL_EVENT_TYPES), eventTypeSchema]))
  .min(1)
  .max(256)
  // A repeated name means nothing more; keep the first occurrence so the order stays the user's.
  .transform((events) => [...new Set(events)]);

/**
 * Operational events (docs/api.md#operational-events) are published by the service itself, never by
 * a client, and `*` does not match them: a subscription gets them only by naming them.
 */
export const OPERATIONAL_PREFIX = "operational.";
export const operationalEventTypes = {
  subscriptionDisabled: "operational.subscription.disabled",
  circuitOpened: "operational.subscription.circuit_opened",
  circuitClosed: "operational.subscription.circuit_closed",
} as const;
export type OperationalEventType = (typeof operationalEventTypes)[keyof typeof operationalEventTypes];

export function isOperationalEventType(type: string): boolean {
  return type.startsWith(OPERATIONAL_PREFIX);
}

/** Whether a subscription listening to `subscribed` wants an event of type `type`. */
export function matchesEventType(subscribed: readonly string[], type: string): boolean {
  return subscribed.includes(type) || (subscribed.includes(ALL_EVENT_TYPES) && !isOperationalEventType(type));
}
