import { type ApiError, PAGE_FAILURE } from "./api.ts";
import { explainCredential, isCredentialField } from "./credential-problems.ts";

/**
 * What went wrong, in the customer's words (docs/portal.md#errors): the API's messages are
 * written for the developers who call it ("url must start with https://", "events[0] must contain
 * only letters, digits and _ - . :"); the portal says the same to someone filling in a form, and
 * names the field it is about, so the form shows it next to that field.
 */
export interface Problem {
  /** The form field it is about (the API's parameter, without index or header name), if any. */
  field?: string | undefined;
  message: string;
  /** The request id, for support: shown under problems the customer cannot fix alone. */
  requestId?: string | undefined;
}

/** What the form sent, to name the value a problem is about (`events[2]` is "invoice paid"). */
export type Sent = Record<string, unknown>;

/** An API error as a Problem: by field (parameter) first, then by kind (HTTP status). */
export function explain(error: ApiError, sent: Sent = {}): Problem {
  if (error.status === 400 && error.param) {
    const field = fieldOf(error.param);
    const reason = reasonIn(error.message, error.param);
    const message = explainField(field, error.param, reason, error.code, sent);
    if (message) return { field, message };
    return { field, message: `${capitalize(FIELD_NAMES[field] ?? field)} ${reason}${reason.endsWith(".") ? "" : "."}` };
  }
  return { message: explainStatus(error), requestId: error.status >= 500 ? error.requestId : undefined };
}

/**
 * `events[2]` -> `events`, `headers.X-Region` -> `headers`, `filter.data.amount` -> `filter`; but
 * `auth.password` and `client_certificate.private_key` stay whole: each is a field of the form.
 */
const fieldOf = (param: string): string =>
  /^(auth|client_certificate)\.[a-z_]+/.exec(param)?.[0] ?? /^[a-z_]+/.exec(param)?.[0] ?? param;

/** The API's message without its parameter's name in front: "url must start with" -> "must start with". */
function reasonIn(message: string, param: string): string {
  return message.startsWith(`${param} `) ? message.slice(param.length + 1) : message;
}

const capitalize = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

/** What the customer sees each field called, for a problem the tables below do not word. */
const FIELD_NAMES: Record<string, string> = {
  url: "the endpoint URL",
  events: "the event types",
  description: "the description",
  headers: "the extra headers",
  response_code: "the response code",
  event: "the event type",
  filter: "the filter",
  since: "the start",
  until: "the end",
  overlap: "the overlap",
  signature_scheme: "the signature scheme",
};

function explainField(
  field: string,
  param: string,
  reason: string,
  code: string | undefined,
  sent: Sent,
): string | undefined {
  if (isCredentialField(field)) return explainCredential(field, reason, code);
  switch (field) {
    case "url":
      return explainUrl(reason, code);
    case "events":
      return explainEvents(param, reason, code, sent);
    case "headers":
      return explainHeaders(param, reason);
    case "filter":
      return explainFilter(reason);
    case "description":
      return /at most/.test(reason) ? "The description is too long: 1,024 characters at most." : undefined;
    case "response_code":
      return "Enter a status code, such as 500, or a group of codes: 2xx, 3xx, 4xx or 5xx.";
    case "since":
    case "until":
      if (/later than/.test(reason)) return "The end must be later than the start.";
      return "Enter a valid date and time.";
    case "overlap":
      return "Choose how long the old secret stays valid.";
    case "signature_scheme":
      return "Choose how webhooks are signed: with a shared secret, or with a key pair.";
    default:
      return undefined;
  }
}

function explainUrl(reason: string, code: string | undefined): string | undefined {
  if (code === "parameter_missing" || /must not be empty/.test(reason)) return "Enter the address of your endpoint.";
  if (/does not accept plain http/.test(reason))
    return "Use an address that starts with https://. Webhooks are not sent over plain http://, which anyone on the way could read.";
  if (/must start with https/.test(reason) || /absolute URL/.test(reason))
    return "Enter the full address of your endpoint, starting with https://, such as https://example.com/webhooks.";
  if (/spaces or control characters/.test(reason)) return "The address must not contain spaces.";
  if (/backslash/.test(reason)) return "The address must not contain a backslash (\\). Use forward slashes (/).";
  if (/credentials/.test(reason))
    return "Take the user name and password out of the address. To send credentials, add them as an extra header, such as Authorization.";
  if (/port 0/.test(reason))
    return "Port 0 cannot be used: leave the port out, or give the one your server listens on.";
  if (/host name/.test(reason)) return "The server name in this address is too long to be looked up.";
  if (/private, loopback or link-local/.test(reason))
    return "This address is on a private network (such as localhost, 10.x.x.x or 192.168.x.x), which we cannot reach. Use an address your server has on the internet.";
  if (/characters long/.test(reason)) return "The address is too long: 2,048 characters at most.";
  return undefined;
}

function explainEvents(param: string, reason: string, code: string | undefined, sent: Sent): string | undefined {
  const index = /^events\[(\d+)\]$/.exec(param)?.[1];
  const named = index === undefined ? undefined : (sent.events as unknown[] | undefined)?.[Number(index)];
  const name = typeof named === "string" ? `"${named}"` : "An event type";
  if (code === "unknown_event_type") {
    // "events names types that the event-type catalog does not have (or has archived): a, b"
    const names = reason.slice(reason.lastIndexOf(": ") + 2);
    return `We do not send ${names.includes(",") ? "these event types" : "this event type"}: ${names}. Choose from the list.`;
  }
  if (/at least 1/.test(reason)) return "Choose at least one event type, or * for every type.";
  if (/at most \d+ items/.test(reason))
    return "An endpoint can list at most 256 event types. Use * to receive every type.";
  if (/only letters, digits/.test(reason))
    return `${name} is not a valid event type name: names have letters, digits and _ - . : only, such as invoice.paid.`;
  if (/characters long/.test(reason)) return `${name} is too long: an event type name has 255 characters at most.`;
  return undefined;
}

const OPERATORS = "$eq, $neq, $gt, $gte, $lt, $lte, $in, $nin, $exists, $startsWith, $and, $or, $not";

/**
 * A filter the API refused (docs/api.md#checked-when-saved): its message starts with the place,
 * `filter.data.amount.$gt`, which is said as "$gt, at data.amount".
 */
function explainFilter(reason: string): string | undefined {
  const place = /^filter(\S*) /.exec(reason);
  const where = (place?.[1] ?? "").replace(/^\./, "");
  const what = place ? reason.slice(place[0].length) : reason;
  const last = where.split(".").at(-1) ?? "";
  const parent = where.split(".").slice(0, -1).join(".");
  const at = (key: string) => (parent ? `${key}, at ${parent},` : key);
  if (/is not an operator/.test(what)) return `${at(last)} is not something a filter can say. It can use ${OPERATORS}.`;
  if (/number or an ISO 8601 date-time/.test(what))
    return `${at(last)} compares with a number, or with a date and time such as 2026-01-31T12:00:00Z.`;
  if (/non-empty array of values/.test(what))
    return `${at(last)} needs a list of values in square brackets, such as ["usd", "eur"].`;
  if (/non-empty array of filters/.test(what))
    return `${at(last)} needs a list of filters in square brackets, such as [{"data": {"plan": "pro"}}, {"data": {"plan": "team"}}].`;
  if (/must be true or false/.test(what)) return `${at(last)} takes true or false.`;
  if (/must be a string/.test(what)) return `${at(last)} takes text in quotes, such as "in_".`;
  if (/nested deeper/.test(what)) return `The filter goes more than 10 levels deep, at ${where}. Make it simpler.`;
  if (/bytes of JSON/.test(what)) return "The filter is too long: 4,096 characters of JSON at most.";
  if (/cannot be used at the top level/.test(what))
    return `${last} cannot come first: a filter starts with "data" (the event's payload) or "type", such as {"data": {"amount": {"${last}": 1000}}}.`;
  if (/is not a field of what filters match/.test(what))
    return `A filter starts with "data" (the event's payload) or "type" (its event type), not "${last}": such as {"data": {"${last}": …}}.`;
  if (/empty object/.test(what))
    return `At ${where}, the filter has an empty condition {}, which would match anything. Give it a value, or remove it.`;
  if (/JSON object, or null/.test(what)) return "The filter must be a JSON object, in braces { }.";
  return where ? `The filter, at ${where}, ${what}.` : undefined;
}

function explainHeaders(param: string, reason: string): string | undefined {
  const header = param.startsWith("headers.") ? param.slice("headers.".length) : undefined;
  if (header === undefined) {
    if (/at most \d+ headers/.test(reason)) return "You can add 20 extra headers at most.";
    if (/bytes/.test(reason))
      return "The extra headers are too long: 4,096 characters at most, names and values together.";
    return undefined;
  }
  if (/together with auth/.test(reason))
    return `The endpoint's authentication sends its own ${header} header, so the extra headers cannot have one too. Remove it from the extra headers, or set the authentication to None.`;
  if (/cannot be set/.test(reason))
    return `We set the ${header} header ourselves, so it cannot be added here. Remove that line.`;
  if (/not a valid header name/.test(reason))
    return `"${header}" is not a valid header name: use letters, digits and dashes, such as X-Customer-Id.`;
  if (/printable ASCII/.test(reason))
    return `The value of ${header} can hold plain ASCII characters only (no accents or emoji), with no space at either end.`;
  if (/given twice/.test(reason))
    return `${header} is given twice (header names ignore upper and lower case). Keep one of them.`;
  if (/cannot be used as a header name/.test(reason)) return `"${header}" cannot be used as a header name.`;
  return undefined;
}

function explainStatus(error: ApiError): string {
  switch (error.status) {
    case PAGE_FAILURE:
      return "Something went wrong in this page. Reload it and try again.";
    case 0:
      return "We could not reach the service. Check your connection and try again.";
    case 403:
      return "This cannot be done from here. Ask the team that sent you this link.";
    case 404:
      return "This no longer exists: it may have been deleted, in another window or by someone else. Reload the page.";
    case 413:
      return "What you entered is too large to be saved.";
    case 429:
      return "Too many requests at once. Wait a moment and try again.";
    case 503:
      return "The service is unavailable for a moment. Try again shortly.";
    case 409:
      if (error.code === "payload_deleted")
        return "This delivery cannot be sent again: the event's payload was erased, and nothing is left to send.";
      return error.message;
    default:
      if (error.status >= 500)
        return "Something went wrong on our side. Try again in a moment; if it keeps happening, contact support and give them the reference below.";
      // A 400 without a parameter, a 409: the API's own message is the most precise there is.
      return error.message;
  }
}
