import { z } from "zod";
import {
  boolean,
  duration,
  durationUpTo,
  integer,
  isPortalLogoUrl,
  oneOf,
  otlpProtocol,
  parseClusterNode,
  parseRetention,
  url,
} from "./config-values.ts";
import { parseDuration } from "./durations.ts";
import { DEFAULT_RETRY_SCHEDULE } from "./retry-schedule.ts";
import { TRACE_SAMPLERS, type TracingConfig } from "./tracing.ts";

/**
 * The whole configuration, read from the environment once at start-up. Every variable is
 * documented in docs/configuration.md, which config-docs.test.ts checks against this schema.
 */

/** Used only outside production so that a fresh clone runs without setup. Never use it for real. */
const DEVELOPMENT_SECRET_ENCRYPTION_KEY = Buffer.alloc(32, "development-only-key").toString("base64");

/**
 * How long a Redis connection may wait for a reply before it is taken for dead, dropped and made
 * again (REDIS_SOCKET_TIMEOUT). Without it, a connection whose network path died without a reset
 * (the Redis host gone, a failover to another address) hangs until the kernel gives up on it,
 * about a quarter of an hour, and every worker with it. At least 15 s: a worker's blocking read
 * waits up to 10 s for a job, its reply is then the first data on the connection.
 */
export const DEFAULT_REDIS_SOCKET_TIMEOUT_MS = 30_000;
const MIN_REDIS_SOCKET_TIMEOUT_MS = 15_000;

/**
 * How long the API and the workers wait for PostgreSQL to answer a statement before they give up
 * on it and on its connection (DATABASE_QUERY_TIMEOUT), for the same reason: a connection whose
 * network path died silently would hang its statement, and the request or job behind it, for a
 * quarter of an hour. Far above what any statement of theirs takes (milliseconds); the
 * migrations, which may take long, run on a connection of their own without it.
 */
export const DEFAULT_DATABASE_QUERY_TIMEOUT_MS = 30_000;

/**
 * While publishes keep coming, the API writes a batch of them at most this often
 * (PUBLISH_BATCH_WINDOW; docs/architecture.md#how-a-publish-flows): events that arrive one request
 * at a time then share the publish statement, the enqueue and the dispatch job, which the worker
 * claims and records as one. Those round trips, not the events' own work, are most of what a lone
 * event costs; a publish after a quieter spell goes at once.
 */
export const DEFAULT_PUBLISH_BATCH_WINDOW_MS = 8;

/** A logo inlined in every portal page: a small one. A larger image is served by path. */
const MAX_PORTAL_LOGO_BYTES = 64 * 1024;

const envSchema = z.object({
  NODE_ENV: oneOf(["development", "test", "production"]).default("development"),
  HOST: z.string().min(1).default("0.0.0.0"),
  PORT: integer(0, 65535).default(3000),
  // Where people reach the API, for the links it hands out (portal session urls).
  PUBLIC_URL: z
    .string()
    .refine((text) => {
      try {
        const url = new URL(text);
        // Links are built as `${PUBLIC_URL}/portal#token=...`: a query or fragment would break them.
        return (
          ["http:", "https:"].includes(url.protocol) &&
          url.search === "" &&
          url.hash === "" &&
          !text.includes("?") &&
          !text.includes("#") &&
          url.username === "" &&
          url.password === ""
        );
      } catch {
        return false;
      }
    }, "must be an http:// or https:// URL without query, fragment or credentials, such as https://webhooks.example.com")
    .optional(),
  DATABASE_URL: url(["postgres:", "postgresql:"]).default("postgresql://postgres@127.0.0.1:5432/webhooks"),
  DATABASE_POOL_SIZE: integer(1, 1000).default(10),
  DATABASE_QUERY_TIMEOUT: duration
    .refine((ms) => ms >= 1_000, "must be at least 1s")
    .default(DEFAULT_DATABASE_QUERY_TIMEOUT_MS),
  REDIS_URL: url(["redis:", "rediss:"]).default("redis://127.0.0.1:6379"),
  QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/, "must contain only letters, digits, _ and -")
    .default("webhooks"),
  REDIS_CLUSTER_NODES: z
    .string()
    .transform((text, ctx) => {
      const nodes = text.split(",").map((node) => parseClusterNode(node.trim()));
      if (nodes.some((node) => node === undefined)) {
        ctx.addIssue({
          code: "custom",
          message: "must be comma-separated host:port pairs such as 10.0.0.1:6379,10.0.0.2:6379",
        });
        return z.NEVER;
      }
      return nodes as { host: string; port: number }[];
    })
    .optional(),
  QUEUE_SHARDS: integer(1, 256).default(1),
  REDIS_SOCKET_TIMEOUT: duration
    .refine(
      (ms) => ms >= MIN_REDIS_SOCKET_TIMEOUT_MS,
      "must be at least 15s (a worker's blocking read waits up to 10 s for its reply)",
    )
    .default(DEFAULT_REDIS_SOCKET_TIMEOUT_MS),
  API_KEYS: z.string().default(""),
  SECRET_ENCRYPTION_KEY: z
    .string()
    .regex(/^[A-Za-z0-9+/]{43}=$/, "must be 32 bytes encoded in base64 (openssl rand -base64 32)")
    .optional(),
  LOG_LEVEL: oneOf(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  LOG_FORMAT: oneOf(["json", "pretty"]).optional(),
  BODY_LIMIT_BYTES: integer(1024, 100 * 1024 * 1024).default(256 * 1024),
  RATE_LIMIT_PER_SECOND: integer(0, 1_000_000).default(0),
  PUBLISH_BATCH_WINDOW: durationUpTo(1_000, "1s").default(DEFAULT_PUBLISH_BATCH_WINDOW_MS),
  ALLOW_HTTP_URLS: boolean.optional(),
  ALLOW_PRIVATE_DESTINATIONS: boolean.optional(),
  ADMIN_USERNAME: z.string().min(1).optional(),
  ADMIN_PASSWORD: z.string().min(1).optional(),
  METRICS_TOKEN: z.string().regex(/^\S+$/, "must be a token without spaces").optional(),
  WORKER_CONCURRENCY: integer(1, 10_000).default(250),
  WORKER_METRICS_PORT: integer(0, 65535).default(3001),
  DELIVERY_TIMEOUT: duration.default(15_000),
  // docs/operations.md#egress-proxy-and-static-ips: every attempt and token request goes through it.
  EGRESS_PROXY_URL: z
    .string()
    .refine((text) => {
      try {
        const url = new URL(text);
        return (
          url.protocol === "http:" &&
          url.port !== "" &&
          (url.pathname === "/" || url.pathname === "") &&
          url.search === "" &&
          url.hash === ""
        );
      } catch {
        return false;
      }
    }, "must be http://[user:password@]host:port, such as http://proxy.internal:3128")
    .optional(),
  RETRY_SCHEDULE: z
    .string()
    .default(DEFAULT_RETRY_SCHEDULE)
    .transform((text, ctx) => {
      const steps = text.split(",").map((step) => parseDuration(step));
      if (steps.length > 50 || steps.some((step) => step === undefined || !Number.isSafeInteger(step))) {
        ctx.addIssue({ code: "custom", message: "must be up to 50 comma-separated durations such as 5s,5m,30m" });
        return z.NEVER;
      }
      return steps as number[];
    }),
  RECONCILE_INTERVAL: duration.default(10_000),
  DEFAULT_MAX_IN_FLIGHT: integer(1, 1000).default(25),
  ORIGIN_MAX_IN_FLIGHT: integer(1, 10_000).default(50),
  MAX_RETRY_AFTER: duration.default(60 * 60_000),
  CIRCUIT_FAILURE_THRESHOLD: integer(1, 1000).default(5),
  // More than 0: the gate keeps an open circuit's probe as a key that expires after this (PX 0 is an error).
  CIRCUIT_PROBE_INTERVAL: duration.refine((ms) => ms > 0, "must be more than 0").default(30_000),
  // Compared with timestamps, never handed to a timer: up to a year.
  AUTO_DISABLE_AFTER: durationUpTo(366 * 24 * 3_600_000, "366d").default(5 * 24 * 3_600_000),
  // docs/api.md#retention. `off` keeps everything.
  RETENTION: z.string().default("30d").transform(parseRetention),
  // docs/api.md#payload-retention: unset means equal to RETENTION; never longer (checked below).
  PAYLOAD_RETENTION: z.string().transform(parseRetention).optional(),
  PRUNE_INTERVAL: duration.refine((ms) => ms > 0, "must be more than 0").default(60_000),
  JOB_LOCK_DURATION: duration.default(30_000),
  SHUTDOWN_TIMEOUT: duration.default(30_000),
  EVENT_TYPES_STRICT: boolean.default(false),
  // The customer portal's branding (docs/portal.md#branding).
  PORTAL_NAME: z
    .string()
    .max(100, "must be at most 100 characters")
    .regex(/^[^\p{Cc}]+$/u, "must not contain control characters")
    .optional(),
  PORTAL_LOGO_URL: z
    .string()
    .max(MAX_PORTAL_LOGO_BYTES, `must be at most ${MAX_PORTAL_LOGO_BYTES / 1024} KiB`)
    .refine(
      isPortalLogoUrl,
      "must be a path on this server, such as /brand/logo.svg, or a data:image/... URL: the portal loads nothing from another origin",
    )
    .optional(),
  PORTAL_RETURN_URL: url(["https:", "http:"]).optional(),
  // OpenTelemetry's own variables (docs/operations.md#tracing): traces are exported only when an
  // endpoint is set. The SDK reads the others it knows (headers, timeouts, batching) itself.
  OTEL_SDK_DISABLED: boolean.default(false),
  OTEL_EXPORTER_OTLP_ENDPOINT: url(["http:", "https:"]).optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: url(["http:", "https:"]).optional(),
  OTEL_EXPORTER_OTLP_PROTOCOL: otlpProtocol.default("http/protobuf"),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: otlpProtocol.optional(),
  OTEL_SERVICE_NAME: z.string().min(1).optional(),
  OTEL_TRACES_SAMPLER: oneOf(TRACE_SAMPLERS).default("parentbased_always_on"),
  OTEL_TRACES_SAMPLER_ARG: z
    .string()
    .regex(/^(0(\.\d+)?|1(\.0+)?)$/, "must be a number between 0 and 1")
    .transform(Number)
    .default(1),
  SEND_TRACEPARENT: boolean.default(false),
});

/** The names of every variable the configuration reads (docs/configuration.md lists each one). */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(envSchema.shape);

export interface Config {
  env: "development" | "test" | "production";
  host: string;
  port: number;
  /** PUBLIC_URL without a trailing slash; `http://localhost:<PORT>` when unset. */
  publicUrl: string;
  databaseUrl: string;
  databasePoolSize: number;
  /** A statement unanswered this long fails, and its connection is dropped (see DEFAULT_DATABASE_QUERY_TIMEOUT_MS). */
  databaseQueryTimeoutMs: number;
  redisUrl: string;
  /**
   * Redis Cluster seed nodes; when set, they replace REDIS_URL's node (whose username, password
   * and TLS still apply to every node).
   */
  redisClusterNodes: { host: string; port: number }[] | undefined;
  /** A Redis connection waiting this long for a reply is dropped and made again (see DEFAULT_REDIS_SOCKET_TIMEOUT_MS). */
  redisSocketTimeoutMs: number;
  queuePrefix: string;
  /** How many queues the deliveries are spread over, each on its own hash slot. */
  queueShards: number;
  apiKeys: string[];
  secretEncryptionKey: Buffer;
  logLevel: string;
  /** LOG_FORMAT; when unset, the logger decides from the mode and the terminal (logFormatFor). */
  logFormat: "json" | "pretty" | undefined;
  bodyLimitBytes: number;
  rateLimitPerSecond: number;
  /** PUBLISH_BATCH_WINDOW (see DEFAULT_PUBLISH_BATCH_WINDOW_MS). */
  publishBatchWindowMs: number;
  destinationPolicy: { allowHttp: boolean; allowPrivateNetworks: boolean };
  admin: { username: string; password: string } | undefined;
  /** When set, the API's /metrics needs `Authorization: Bearer <token>`. */
  metricsToken: string | undefined;
  worker: {
    concurrency: number;
    metricsPort: number;
    deliveryTimeoutMs: number;
    /** EGRESS_PROXY_URL: attempts and token requests go through this HTTP proxy; undefined to connect directly. */
    egressProxyUrl: string | undefined;
    retryScheduleMs: number[];
    reconcileIntervalMs: number;
    jobLockMs: number;
    shutdownTimeoutMs: number;
    /** SEND_TRACEPARENT: each attempt carries a W3C `traceparent` header (docs/receiving.md#tracing). */
    sendTraceparent: boolean;
  };
  /** Endpoint isolation and health (docs/api.md#endpoint-isolation). */
  isolation: IsolationConfig;
  /** Where traces go (docs/operations.md#tracing); undefined: tracing is off and costs nothing. */
  tracing: TracingConfig | undefined;
  /**
   * Only event types of the catalog may be published and subscribed to (docs/api.md#event-types):
   * an unknown or archived type is refused instead of published as before.
   */
  eventTypesStrict: boolean;
  /** How long finished deliveries are kept (docs/api.md#retention), and how often the worker prunes. */
  retention: {
    /** Finished deliveries older than this are deleted; undefined (RETENTION=off) keeps them all. */
    maxAgeMs: number | undefined;
    /** Payloads older than this are erased (at most maxAgeMs); undefined (off) keeps them. */
    payloadMaxAgeMs: number | undefined;
    pruneIntervalMs: number;
  };
  /** How the customer portal presents itself (docs/portal.md#branding). */
  portal: PortalBranding;
}

export interface PortalBranding {
  /** The page's title and header: the product that hands out the portal. */
  name: string;
  /** A path on the API's origin, or a data:image URL. */
  logoUrl: string | undefined;
  /** The link back to the product's own pages: "Back to <label>". */
  back: { url: string; label: string } | undefined;
}

export const DEFAULT_PORTAL_NAME = "Webhooks";

export interface IsolationConfig {
  /** max_in_flight of a subscription created without one. */
  defaultMaxInFlight: number;
  /** Attempts in flight at once to one origin (scheme, host, port), whatever the subscriptions. */
  originMaxInFlight: number;
  /** The longest a Retry-After can hold a subscription. */
  maxRetryAfterMs: number;
  /** Consecutive timeouts, connection errors or 5xx that open the circuit. */
  circuitFailureThreshold: number;
  /** How often an open circuit lets one probe through. */
  circuitProbeIntervalMs: number;
  /** A subscription failing this long without a success is disabled. */
  autoDisableAfterMs: number;
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

/** Parses the environment; a bad value throws a ConfigError that names the variable. */
export function loadConfig(source: Record<string, string | undefined> = process.env): Config {
  // An empty variable is treated as unset, as shells and .env files commonly leave them.
  const env = Object.fromEntries(Object.entries(source).filter(([, value]) => value !== undefined && value !== ""));
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => {
      const name = String(issue.path[0]);
      // Echo the value to help fix it, except where it may hold a credential.
      const sensitive = /KEY|PASSWORD|TOKEN|URL|ENDPOINT/.test(name);
      const got = env[name] === undefined || sensitive ? "" : ` (got ${JSON.stringify(env[name])})`;
      return `${name} ${issue.message}${got}`;
    });
    throw new ConfigError(`Invalid configuration: ${problems.join("; ")}`);
  }
  const e = parsed.data;
  const production = e.NODE_ENV === "production";
  if (production && e.PORTAL_RETURN_URL?.startsWith("http:")) {
    throw new ConfigError("Invalid configuration: PORTAL_RETURN_URL must start with https:// when NODE_ENV=production");
  }
  if (production && !e.SECRET_ENCRYPTION_KEY) {
    throw new ConfigError("Invalid configuration: SECRET_ENCRYPTION_KEY is required when NODE_ENV=production");
  }
  if ((e.ADMIN_USERNAME === undefined) !== (e.ADMIN_PASSWORD === undefined)) {
    throw new ConfigError("Invalid configuration: ADMIN_USERNAME and ADMIN_PASSWORD must be set together");
  }
  // A cluster has only database 0: a REDIS_URL naming another one would be silently ignored.
  if (e.REDIS_CLUSTER_NODES && !/^\/?0?$/.test(new URL(e.REDIS_URL).pathname)) {
    throw new ConfigError(
      "Invalid configuration: REDIS_URL must not name a database other than 0 when REDIS_CLUSTER_NODES is set (a cluster has only database 0)",
    );
  }
  // Unset, payloads go with their events; set, never kept longer than the events (a payload kept
  // past RETENTION would be deleted with its event anyway).
  const payloadRetention = "PAYLOAD_RETENTION" in env ? e.PAYLOAD_RETENTION : e.RETENTION;
  if (e.RETENTION !== undefined && (payloadRetention === undefined || payloadRetention > e.RETENTION)) {
    throw new ConfigError(
      `Invalid configuration: PAYLOAD_RETENTION (${env.PAYLOAD_RETENTION}) must not be longer than RETENTION (${env.RETENTION ?? "30d"}): an event's payload cannot outlive the event`,
    );
  }
  return {
    env: e.NODE_ENV,
    host: e.HOST,
    port: e.PORT,
    publicUrl: (e.PUBLIC_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ""),
    databaseUrl: e.DATABASE_URL,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    databaseQueryTimeoutMs: e.DATABASE_QUERY_TIMEOUT,
    redisUrl: e.REDIS_URL,
    redisClusterNodes: e.REDIS_CLUSTER_NODES,
    redisSocketTimeoutMs: e.REDIS_SOCKET_TIMEOUT,
    queuePrefix: e.QUEUE_PREFIX,
    queueShards: e.QUEUE_SHARDS,
    apiKeys: e.API_KEYS.split(",")
      .map((key) => key.trim())
      .filter((key) => key.length > 0),
    secretEncryptionKey: Buffer.from(e.SECRET_ENCRYPTION_KEY ?? DEVELOPMENT_SECRET_ENCRYPTION_KEY, "base64"),
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT,
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    rateLimitPerSecond: e.RATE_LIMIT_PER_SECOND,
    publishBatchWindowMs: e.PUBLISH_BATCH_WINDOW,
    destinationPolicy: {
      allowHttp: e.ALLOW_HTTP_URLS ?? !production,
      allowPrivateNetworks: e.ALLOW_PRIVATE_DESTINATIONS ?? !production,
    },
    admin:
      e.ADMIN_USERNAME && e.ADMIN_PASSWORD ? { username: e.ADMIN_USERNAME, password: e.ADMIN_PASSWORD } : undefined,
    metricsToken: e.METRICS_TOKEN,
    worker: {
      concurrency: e.WORKER_CONCURRENCY,
      metricsPort: e.WORKER_METRICS_PORT,
      deliveryTimeoutMs: e.DELIVERY_TIMEOUT,
      egressProxyUrl: e.EGRESS_PROXY_URL,
      retryScheduleMs: e.RETRY_SCHEDULE,
      reconcileIntervalMs: e.RECONCILE_INTERVAL,
      jobLockMs: e.JOB_LOCK_DURATION,
      shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT,
      sendTraceparent: e.SEND_TRACEPARENT,
    },
    isolation: {
      defaultMaxInFlight: e.DEFAULT_MAX_IN_FLIGHT,
      originMaxInFlight: e.ORIGIN_MAX_IN_FLIGHT,
      maxRetryAfterMs: e.MAX_RETRY_AFTER,
      circuitFailureThreshold: e.CIRCUIT_FAILURE_THRESHOLD,
      circuitProbeIntervalMs: e.CIRCUIT_PROBE_INTERVAL,
      autoDisableAfterMs: e.AUTO_DISABLE_AFTER,
    },
    tracing: tracingConfig(e),
    eventTypesStrict: e.EVENT_TYPES_STRICT,
    retention: {
      maxAgeMs: e.RETENTION,
      payloadMaxAgeMs: payloadRetention,
      pruneIntervalMs: e.PRUNE_INTERVAL,
    },
    portal: {
      name: e.PORTAL_NAME ?? DEFAULT_PORTAL_NAME,
      logoUrl: e.PORTAL_LOGO_URL,
      // "Back to Acme"; without a name, "Back to app.acme.com" rather than "Back to Webhooks".
      back: e.PORTAL_RETURN_URL
        ? { url: e.PORTAL_RETURN_URL, label: e.PORTAL_NAME ?? new URL(e.PORTAL_RETURN_URL).host }
        : undefined,
    },
  };
}

/**
 * Tracing is on when an endpoint is set and the SDK is not disabled. The traces endpoint is used
 * as it is; the general one gets the signal's path appended, as OpenTelemetry specifies.
 */
function tracingConfig(e: z.infer<typeof envSchema>): TracingConfig | undefined {
  const base = e.OTEL_EXPORTER_OTLP_ENDPOINT;
  const tracesUrl =
    e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (base === undefined ? undefined : `${base.replace(/\/+$/, "")}/v1/traces`);
  if (tracesUrl === undefined || e.OTEL_SDK_DISABLED) return undefined;
  return {
    tracesUrl,
    protocol: e.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? e.OTEL_EXPORTER_OTLP_PROTOCOL,
    serviceName: e.OTEL_SERVICE_NAME,
    sampler: e.OTEL_TRACES_SAMPLER,
    samplerArg: e.OTEL_TRACES_SAMPLER_ARG,
  };
}
