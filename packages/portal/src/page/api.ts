import type { components, paths } from "@webhooks/client";
import createClient, { type Client } from "openapi-fetch";

// Types only: the page bundles openapi-fetch, not the client package's Node-side helpers.
type Schemas = components["schemas"];
export type Subscription = Schemas["Subscription"];
export type SubscriptionWithSecret = Schemas["SubscriptionWithSecret"];
export type Delivery = Schemas["Delivery"];
export type DeliveryAttempt = Schemas["DeliveryAttempt"];
export type Recovery = Schemas["Recovery"];
export type SubscriptionStats = Schemas["SubscriptionStats"];
export type EventType = Schemas["EventType"];
export type PayloadFilter = NonNullable<Subscription["filter"]>;
export type DeliveryStatus = Delivery["status"];
export type PortalClient = Client<paths>;

/**
 * A failed call, with the API's own message, parameter and code (docs/api.md#errors); problems.ts
 * says it in the customer's words. Status 0: the service could not be reached.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param?: string,
    readonly requestId?: string,
    readonly code?: string,
  ) {
    super(message);
  }
}

/**
 * The public /v1 API with the link's token as an ordinary bearer credential: the portal has no
 * other way in. A 401 means the token expired or was never valid; `onUnauthorized` says so.
 */
export function createPortalClient(token: string, onUnauthorized: () => void): PortalClient {
  const client = createClient<paths>({ baseUrl: location.origin, headers: { authorization: `Bearer ${token}` } });
  client.use({
    onResponse({ response }) {
      if (response.status === 401) onUnauthorized();
      return undefined;
    },
  });
  return client;
}

interface ErrorBody {
  error?: { message?: unknown; param?: unknown; request_id?: unknown; code?: unknown };
}

/** The data of a successful call; anything else throws an ApiError a person can read. */
export async function unwrap<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  let result: { data?: T; error?: unknown; response: Response };
  try {
    result = await call;
  } catch {
    throw new ApiError(0, "The service could not be reached. Check your connection and try again.");
  }
  const { response, data, error } = result;
  if (response.ok && error === undefined) return data as T;
  const body = (typeof error === "object" && error !== null ? error : {}) as ErrorBody;
  const text = (value: unknown) => (typeof value === "string" ? value : undefined);
  const message =
    text(body.error?.message) ??
    `The service answered with an unexpected error (HTTP ${response.status}). Try again later.`;
  const requestId = text(body.error?.request_id) ?? response.headers.get("request-id") ?? undefined;
  throw new ApiError(response.status, message, text(body.error?.param), requestId, text(body.error?.code));
}

/** The status of an ApiError that is not the service's answer but a failure in the page itself. */
export const PAGE_FAILURE = -1;

/** Anything thrown, as an ApiError. */
export const asApiError = (error: unknown): ApiError =>
  error instanceof ApiError
    ? error
    : new ApiError(PAGE_FAILURE, error instanceof Error ? error.message : "Something went wrong.");
