import type { Span } from "@opentelemetry/api";
import type { Config, Logger, SecretBox, Tracing } from "@webhooks/core";
import type { PrismaClient, SqlClient, TenantScope } from "@webhooks/db";
import type { DeliveryGate, DeliveryQueue, RedisConnection } from "@webhooks/queue";
import type { EventTypeCatalogCache } from "../events/catalog-cache.ts";
import type { EventPublisher } from "../events/publisher.ts";

/** Everything the API needs from the outside world, built once in main.ts (or by a test). */
export interface ApiDeps {
  config: Config;
  /** The ORM client: every query but the hot few below goes through it. */
  prisma: PrismaClient;
  /**
   * The same connections as `prisma`, through node-postgres directly, for the delivery path's hot
   * statements (publishing; packages/db/src/sql.ts says why). The db verbs call it `ctx.sql`.
   */
  pool: SqlClient;
  redis: RedisConnection;
  queue: DeliveryQueue;
  /** The workers' gate: the API tells it when a subscription is enabled again (its line may move). */
  gate: DeliveryGate;
  /** Batches publishes (events/publisher.ts); one per process, so that shutdown can wait for it. */
  publisher: EventPublisher;
  /** The event-type catalog as publishing reads it; the catalog's routes tell it of their changes. */
  catalog: EventTypeCatalogCache;
  logger: Logger;
  secretBox: SecretBox;
  authenticator: Authenticator;
  /** The OpenTelemetry SDK, when traces are exported (docs/operations.md#tracing); undefined when off. */
  tracing?: Tracing | undefined;
}

export interface ApiEnv {
  Variables: {
    requestId: string;
    logger: Logger;
    /** The credential's id (a key id, `static`, or a portal session's id): the rate limit counts by it. */
    apiKeyId: string;
    /** Who is asking: every route hands `principal.scope` to the data layer, which applies it. */
    principal: Principal;
    /** The request's server span and its traceparent, when tracing is on (http/tracing.ts). */
    span: Span | undefined;
    traceparent: string | undefined;
  };
}

/** An authenticated credential (docs/api.md#authentication, docs/api.md#tenant-scoped-api-keys). */
export interface Principal {
  /** A stored key's id, `static` for API_KEYS, or a portal session's id. */
  keyId: string;
  kind: "api_key" | "portal_session";
  /** Unscoped (every tenant) or one tenant's resources only. */
  scope: TenantScope;
}

/** What checking a bearer credential found: who it is, or why it is refused. */
export type Authentication = { ok: true; principal: Principal } | { ok: false; reason: "invalid" | "expired" };

/** Checks a bearer credential (auth.ts's CredentialAuthenticator): API keys and portal session tokens. */
export interface Authenticator {
  authenticate(credential: string): Promise<Authentication>;
}
