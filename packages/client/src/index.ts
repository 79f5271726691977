import createClient, { type Client } from "openapi-fetch";
import { WebhookVerificationError } from "standardwebhooks";
import type { components, operations, paths } from "./schema.ts";

export type { components, operations, paths };
export { WebhookVerificationError };

type Schemas = components["schemas"];
export type Subscription = Schemas["Subscription"];
export type SubscriptionWithSecret = Schemas["SubscriptionWithSecret"];
export type Event = Schemas["Event"];
export type Delivery = Schemas["Delivery"];
export type DeliveryAttempt = Schemas["DeliveryAttempt"];
export type PortalSession = Schemas["PortalSession"];
export type EventType = Schemas["EventType"];
export type EventTypeList = Schemas["EventTypeList"];
export type ApiErrorBody = Schemas["Error"];

export type WebhooksClient = Client<paths>;

export interface WebhooksClientOptions {
  /** Where the API is, e.g. http://localhost:3000. */
  baseUrl: string;
  /** An API key, sent as `Authorization: Bearer <key>`. */
  apiKey: string;
  /** Another fetch implementation (tests, proxies); the global fetch by default. */
  fetch?: (request: Request) => Promise<Response>;
}

/**
 * A typed client of the API: `client.POST("/v1/events", { body })` checks the path, the parameters
 * and the body against the OpenAPI document, and types `data` (2xx) and `error` (the error shape).
 * src/schema.ts is generated from the document: `npm run generate -w @webhooks/client`.
 */
export function createWebhooksClient({ baseUrl, apiKey, fetch }: WebhooksClientOptions): WebhooksClient {
  return createClient<paths>({ baseUrl, headers: { authorization: `Bearer ${apiKey}` }, ...(fetch ? { fetch } : {}) });
}

export { verifyWebhook, type WebhookHeaders, type WebhookPayload } from "./verify-webhook.ts";
