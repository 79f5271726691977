import type { Delivery, Subscription } from "./api.ts";

// The viewer's own zone, named in every time shown ("Nov 28, 2026, 3:32:40 AM GMT+1", or "EST"):
// a log read across zones, or pasted into a support ticket, must say which clock it is on.
// (dateStyle/timeStyle cannot be combined with timeZoneName, hence the fields one by one.)
const dateTime = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "numeric",
  hour: "numeric",
  minute: "2-digit",
  second: "2-digit",
  timeZoneName: "short",
});

export const formatTime = (iso: string): string => dateTime.format(new Date(iso));

/** The viewer's zone, as the page names it: "Europe/Paris (GMT+1)", or "UTC". */
export function timeZoneLabel(now = new Date()): string {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const offset = new Intl.DateTimeFormat("en", { timeZone: zone, timeZoneName: "shortOffset" })
    .formatToParts(now)
    .find((part) => part.type === "timeZoneName")?.value;
  return offset && zone !== "UTC" ? `${zone} (${offset})` : zone;
}

/** "invoice.paid, invoice.failed" or "invoice.paid invoice.failed" -> the list the API takes. */
export const parseEventTypes = (text: string): string[] => text.split(/[\s,]+/).filter(Boolean);

export const formatEventTypes = (events: string[]): string => events.join(", ");

/** One header a line, "Name: value". Returns the object, or the line that does not parse. */
export function parseHeaders(text: string): { headers: Record<string, string> } | { problem: string } {
  const headers: Record<string, string> = {};
  const lines = text.split("\n");
  for (const [index, line] of lines.entries()) {
    if (line.trim() === "") continue;
    const colon = line.indexOf(":");
    if (colon <= 0)
      return { problem: `Line ${index + 1} must be a header's name, a colon and its value, such as X-Customer: 42.` };
    headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
  }
  return { headers };
}

export const formatHeaders = (headers: Record<string, string>): string =>
  Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}`)
    .join("\n");

/** What a person needs to know about an endpoint's state, in words. */
export function endpointStatus(subscription: Subscription): { label: string; tone: "good" | "warn" | "bad" | "muted" } {
  if (subscription.disabled_reason) return { label: "Disabled", tone: "bad" };
  if (!subscription.active) return { label: "Paused", tone: "muted" };
  return { label: "Active", tone: "good" };
}

export function healthLabel(subscription: Subscription): { label: string; tone: "good" | "warn" | "bad" } {
  switch (subscription.health.state) {
    case "healthy":
      return { label: "Healthy", tone: "good" };
    case "failing":
      return { label: "Failing", tone: "warn" };
    case "circuit_open":
      return { label: "Sending paused after failures", tone: "bad" };
  }
}

export const disabledReasonText: Record<NonNullable<Subscription["disabled_reason"]>, string> = {
  failing:
    "We stopped sending to this endpoint because it has failed for a long time without a single successful delivery. " +
    "Fix the endpoint, then press Resume; you can then resend the failed deliveries.",
  gone: "We stopped sending to this endpoint because it answered 410 Gone, which means it no longer wants webhooks. Press Resume to start again.",
};

export function deliveryStatus(delivery: Delivery): { label: string; tone: "good" | "warn" | "bad" | "muted" } {
  switch (delivery.status) {
    case "delivered":
      return { label: "Delivered", tone: "good" };
    case "queued":
      return { label: "Queued", tone: "muted" };
    case "failed":
      return delivery.next_retry_at ? { label: "Failed, will retry", tone: "warn" } : { label: "Failed", tone: "bad" };
  }
}

/** Whether a retry is planned within the next minute: worth watching for. */
export const retriesSoon = (delivery: Delivery): boolean =>
  delivery.next_retry_at !== null && new Date(delivery.next_retry_at).getTime() - Date.now() < 60_000;

/** A local date-time input's value (no zone) for an instant; and back to ISO 8601. */
export function toLocalInput(date: Date): string {
  const local = new Date(date.getTime() - date.getTimezoneOffset() * 60_000);
  return local.toISOString().slice(0, 16);
}

export const fromLocalInput = (value: string): string | undefined => {
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
};
