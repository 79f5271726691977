import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../src/config.ts";
import { configError } from "./config-error.ts";

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

const validKey = randomBytes(32).toString("base64");

describe("loadConfig defaults", () => {
  const config = loadConfig({});

  it("reads development settings from an empty environment", () => {
    expect(config.env).toBe("development");
    expect(config.host).toBe("0.0.0.0");
    expect(config.port).toBe(3000);
    expect(config.logLevel).toBe("info");
    expect(config.apiKeys).toEqual([]);
    expect(config.admin).toBeUndefined();
    expect(config.eventTypesStrict).toBe(false);
  });

  it("points at local PostgreSQL and Redis", () => {
    const database = new URL(config.databaseUrl);
    expect(database.protocol).toBe("postgresql:");
    expect(database.hostname).toBe("127.0.0.1");
    expect(database.port).toBe("5432");
    expect(config.databasePoolSize).toBe(10);
    expect(config.redisUrl).toBe("redis://127.0.0.1:6379");
    expect(config.queuePrefix).toBe("webhooks");
  });

  it("uses the worker defaults", () => {
    expect(config.worker.concurrency).toBe(250);
    expect(config.worker.deliveryTimeoutMs).toBe(15_000);
    expect(config.worker.retryScheduleMs).toEqual([
      5 * SECOND,
      5 * MINUTE,
      30 * MINUTE,
      2 * HOUR,
      5 * HOUR,
      10 * HOUR,
      10 * HOUR,
    ]);
    expect(config.worker.metricsPort).toBe(3001);
    expect(config.worker.reconcileIntervalMs).toBe(10_000);
    expect(config.worker.jobLockMs).toBe(30_000);
    expect(config.worker.shutdownTimeoutMs).toBe(30_000);
    expect(config.worker.egressProxyUrl).toBeUndefined();
  });

  it("uses the isolation defaults", () => {
    expect(config.isolation).toEqual({
      defaultMaxInFlight: 25,
      originMaxInFlight: 50,
      maxRetryAfterMs: HOUR,
      circuitFailureThreshold: 5,
      circuitProbeIntervalMs: 30 * SECOND,
      autoDisableAfterMs: 5 * 24 * HOUR,
    });
  });

  it("refuses isolation settings out of range; AUTO_DISABLE_AFTER may exceed the timer limit", () => {
    expect(loadConfig({ AUTO_DISABLE_AFTER: "366d" }).isolation.autoDisableAfterMs).toBe(366 * 24 * HOUR);
    expect(() => loadConfig({ DEFAULT_MAX_IN_FLIGHT: "0" })).toThrow(
      /DEFAULT_MAX_IN_FLIGHT must be an integer between 1 and 1000/,
    );
    expect(() => loadConfig({ AUTO_DISABLE_AFTER: "400d" })).toThrow(
      /AUTO_DISABLE_AFTER must be a duration .* at most 366d/,
    );
  });

  it("keeps finished deliveries 30 days and prunes every minute", () => {
    expect(config.retention).toEqual({
      maxAgeMs: 30 * 24 * HOUR,
      payloadMaxAgeMs: 30 * 24 * HOUR,
      pruneIntervalMs: MINUTE,
    });
  });

  it("reads RETENTION beyond the timer limit, or off; refuses 0 and out-of-range values", () => {
    expect(loadConfig({ RETENTION: "400d" }).retention.maxAgeMs).toBe(400 * 24 * HOUR);
    expect(loadConfig({ RETENTION: "3660d" }).retention.maxAgeMs).toBe(3660 * 24 * HOUR);
    expect(loadConfig({ RETENTION: "off" }).retention.maxAgeMs).toBeUndefined();
    expect(() => loadConfig({ RETENTION: "0" })).toThrow(
      /RETENTION must be a duration .*more than 0 .*or off \(got "0"\)/,
    );
    expect(() => loadConfig({ RETENTION: "0d" })).toThrow(/RETENTION must be a duration/);
    expect(() => loadConfig({ RETENTION: "3661d" })).toThrow(/RETENTION must be a duration .*at most 3660d/);
    expect(() => loadConfig({ RETENTION: "OFF" })).toThrow(/RETENTION must be a duration/);
    expect(() => loadConfig({ PRUNE_INTERVAL: "0s" })).toThrow(/PRUNE_INTERVAL must be more than 0/);
    // PAYLOAD_RETENTION follows RETENTION unless set, and never exceeds it.
    expect(loadConfig({ RETENTION: "90d" }).retention.payloadMaxAgeMs).toBe(90 * 24 * HOUR);
    expect(loadConfig({ RETENTION: "off" }).retention.payloadMaxAgeMs).toBeUndefined();
    expect(loadConfig({ PAYLOAD_RETENTION: "7d" }).retention).toMatchObject({
      maxAgeMs: 30 * 24 * HOUR,
      payloadMaxAgeMs: 7 * 24 * HOUR,
    });
    expect(loadConfig({ RETENTION: "off", PAYLOAD_RETENTION: "1d" }).retention).toMatchObject({
      maxAgeMs: undefined,
      payloadMaxAgeMs: 24 * HOUR,
    });
    expect(loadConfig({ RETENTION: "7d", PAYLOAD_RETENTION: "7d" }).retention.payloadMaxAgeMs).toBe(7 * 24 * HOUR);
    expect(() => loadConfig({ RETENTION: "7d", PAYLOAD_RETENTION: "8d" })).toThrow(
      /PAYLOAD_RETENTION \(8d\) must not be longer than RETENTION \(7d\)/,
    );
    expect(() => loadConfig({ PAYLOAD_RETENTION: "31d" })).toThrow(/must not be longer than RETENTION \(30d\)/);
    expect(() => loadConfig({ PAYLOAD_RETENTION: "off" })).toThrow(/PAYLOAD_RETENTION \(off\) must not be longer/);
    expect(() => loadConfig({ PAYLOAD_RETENTION: "0" })).toThrow(/PAYLOAD_RETENTION must be a duration/);
    // The gate keeps an open circuit's probe as a key expiring after this: Redis refuses PX 0.
    expect(() => loadConfig({ CIRCUIT_PROBE_INTERVAL: "0s" })).toThrow(/CIRCUIT_PROBE_INTERVAL must be more than 0/);
    expect(() => loadConfig({ PRUNE_INTERVAL: "30d" })).toThrow(/PRUNE_INTERVAL must be a duration .* at most 24d/);
  });

  it("uses the API limits", () => {
    expect(config.bodyLimitBytes).toBe(256 * 1024);
    expect(config.rateLimitPerSecond).toBe(0);
  });

  it("allows plain HTTP and private destinations outside production", () => {
    expect(config.destinationPolicy).toEqual({ allowHttp: true, allowPrivateNetworks: true });
    expect(loadConfig({ NODE_ENV: "test" }).destinationPolicy).toEqual({ allowHttp: true, allowPrivateNetworks: true });
  });

  it("has a 32-byte development encryption key", () => {
    expect(config.secretEncryptionKey).toHaveLength(32);
  });

  it("ignores variables it does not know", () => {
    expect(loadConfig({ PATH: "/usr/bin", HOME: "/root", SOMETHING_ELSE: "x" }).port).toBe(3000);
  });
});

describe("loadConfig values", () => {
  it("reads every variable", () => {
    const config = loadConfig({
      NODE_ENV: "test",
      HOST: "127.0.0.1",
      PORT: "8080",
      DATABASE_URL: "postgres://app:pw@db.internal:6543/hooks",
      DATABASE_POOL_SIZE: "25",
      DATABASE_QUERY_TIMEOUT: "1m",
      REDIS_URL: "rediss://cache.internal:6380/2",
      QUEUE_PREFIX: "test_run-7",
      QUEUE_SHARDS: "4",
      REDIS_SOCKET_TIMEOUT: "45s",
      API_KEYS: "alpha",
      SECRET_ENCRYPTION_KEY: validKey,
      LOG_LEVEL: "debug",
      BODY_LIMIT_BYTES: "1024",
      RATE_LIMIT_PER_SECOND: "100",
      PUBLISH_BATCH_WINDOW: "20ms",
      ALLOW_HTTP_URLS: "false",
      ALLOW_PRIVATE_DESTINATIONS: "0",
      ADMIN_USERNAME: "admin",
      ADMIN_PASSWORD: "s3cret",
      WORKER_CONCURRENCY: "4",
      WORKER_METRICS_PORT: "0",
      DELIVERY_TIMEOUT: "500ms",
      RETRY_SCHEDULE: "100ms,1s,2m",
      RECONCILE_INTERVAL: "1s",
      JOB_LOCK_DURATION: "2m",
      SHUTDOWN_TIMEOUT: "5s",
      DEFAULT_MAX_IN_FLIGHT: "3",
      ORIGIN_MAX_IN_FLIGHT: "7",
      MAX_RETRY_AFTER: "10m",
      CIRCUIT_FAILURE_THRESHOLD: "2",
      CIRCUIT_PROBE_INTERVAL: "500ms",
      AUTO_DISABLE_AFTER: "30d",
      RETENTION: "90d",
      PAYLOAD_RETENTION: "14d",
      PRUNE_INTERVAL: "5m",
      PUBLIC_URL: "https://hooks.example.com/base/",
      EVENT_TYPES_STRICT: "true",
      PORTAL_NAME: "Acme",
      PORTAL_LOGO_URL: "/brand/acme.svg",
      PORTAL_RETURN_URL: "https://app.acme.test/settings",
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_SERVICE_NAME: "hooks",
      OTEL_TRACES_SAMPLER: "traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0.5",
      SEND_TRACEPARENT: "true",
    });
    expect(config).toEqual({
      isolation: {
        defaultMaxInFlight: 3,
        originMaxInFlight: 7,
        maxRetryAfterMs: 10 * MINUTE,
        circuitFailureThreshold: 2,
        circuitProbeIntervalMs: 500,
        autoDisableAfterMs: 30 * 24 * HOUR,
      },
      retention: { maxAgeMs: 90 * 24 * HOUR, payloadMaxAgeMs: 14 * 24 * HOUR, pruneIntervalMs: 5 * MINUTE },
      eventTypesStrict: true,
      env: "test",
      host: "127.0.0.1",
      port: 8080,
      publicUrl: "https://hooks.example.com/base",
      databaseUrl: "postgres://app:pw@db.internal:6543/hooks",
      databasePoolSize: 25,
      databaseQueryTimeoutMs: 60_000,
      redisUrl: "rediss://cache.internal:6380/2",
      queuePrefix: "test_run-7",
      queueShards: 4,
      redisSocketTimeoutMs: 45_000,
      apiKeys: ["alpha"],
      secretEncryptionKey: Buffer.from(validKey, "base64"),
      logLevel: "debug",
      bodyLimitBytes: 1024,
      rateLimitPerSecond: 100,
      publishBatchWindowMs: 20,
      destinationPolicy: { allowHttp: false, allowPrivateNetworks: false },
      admin: { username: "admin", password: "s3cret" },
      worker: {
        concurrency: 4,
        metricsPort: 0,
        deliveryTimeoutMs: 500,
        retryScheduleMs: [100, 1_000, 120_000],
        reconcileIntervalMs: 1_000,
        jobLockMs: 120_000,
        shutdownTimeoutMs: 5_000,
        sendTraceparent: true,
      },
      tracing: {
        tracesUrl: "http://collector:4318/v1/traces",
        protocol: "http/json",
        serviceName: "hooks",
        sampler: "traceidratio",
        samplerArg: 0.5,
      },
      portal: {
        name: "Acme",
        logoUrl: "/brand/acme.svg",
        back: { url: "https://app.acme.test/settings", label: "Acme" },
      },
    });
  });

  it.each([
    ["true", true],
    ["1", true],
    ["false", false],
    ["0", false],
  ])("reads the boolean %j as %s", (text, value) => {
    const config = loadConfig({ ALLOW_HTTP_URLS: text, ALLOW_PRIVATE_DESTINATIONS: text });
    expect(config.destinationPolicy).toEqual({ allowHttp: value, allowPrivateNetworks: value });
  });

  it("reads PORT at both ends of its range", () => {
    expect(loadConfig({ PORT: "0" }).port).toBe(0);
    expect(loadConfig({ PORT: "65535" }).port).toBe(65535);
  });

  it("accepts a retry schedule with spaces after the commas", () => {
    expect(loadConfig({ RETRY_SCHEDULE: "1s, 2s ,3s" }).worker.retryScheduleMs).toEqual([1_000, 2_000, 3_000]);
  });

  it("accepts a retry schedule of up to 50 steps", () => {
    expect(loadConfig({ RETRY_SCHEDULE: Array(50).fill("1s").join(",") }).worker.retryScheduleMs).toHaveLength(50);
    expect(configError({ RETRY_SCHEDULE: Array(51).fill("1s").join(",") }).message).toContain("RETRY_SCHEDULE");
  });

  it("accepts both postgres: and postgresql: URLs, and rediss:", () => {
    expect(loadConfig({ DATABASE_URL: "postgres://localhost/x" }).databaseUrl).toBe("postgres://localhost/x");
    expect(loadConfig({ DATABASE_URL: "postgresql://localhost/x" }).databaseUrl).toBe("postgresql://localhost/x");
    expect(loadConfig({ REDIS_URL: "rediss://localhost:6380" }).redisUrl).toBe("rediss://localhost:6380");
  });
});

describe("loadConfig errors", () => {
  it.each([
    ["PORT", "abc"],
    ["PORT", "70000"],
    ["PORT", "65536"],
    ["PORT", "-1"],
    ["PORT", "80.5"],
    ["PORT", "1e3"],
    ["PORT", " 3000"],
    ["REDIS_URL", "http://x"],
    ["REDIS_URL", "not a url"],
    ["DATABASE_URL", "mysql://x"],
    ["DATABASE_URL", "127.0.0.1:5432"],
    ["DATABASE_POOL_SIZE", "0"],
    ["QUEUE_PREFIX", "bad prefix"],
    ["QUEUE_PREFIX", "a:b"],
    ["RETRY_SCHEDULE", "5x"],
    ["RETRY_SCHEDULE", "5s,,5m"],
    ["RETRY_SCHEDULE", "5s,"],
    ["RETRY_SCHEDULE", "5"],
    ["DELIVERY_TIMEOUT", "15"],
    ["DELIVERY_TIMEOUT", "1.5s"],
    // Longer than a Node timer can wait: AbortSignal.timeout would fire at once.
    ["DELIVERY_TIMEOUT", "30d"],
    ["SHUTDOWN_TIMEOUT", "25d"],
    ["RETRY_SCHEDULE", `5s,${"9".repeat(400)}s`],
    ["RECONCILE_INTERVAL", "soon"],
    ["JOB_LOCK_DURATION", "-1s"],
    ["SHUTDOWN_TIMEOUT", "30 s"],
    ["ALLOW_HTTP_URLS", "yes"],
    ["ALLOW_HTTP_URLS", "TRUE"],
    ["ALLOW_PRIVATE_DESTINATIONS", "no"],
    ["LOG_LEVEL", "loud"],
    ["LOG_LEVEL", "INFO"],
    ["NODE_ENV", "staging"],
    ["WORKER_CONCURRENCY", "0"],
    ["BODY_LIMIT_BYTES", "10"],
    ["RETENTION", "0"],
    ["RETENTION", "forever"],
    ["PRUNE_INTERVAL", "1.5m"],
  ])("refuses %s=%j with a ConfigError naming it", (name, value) => {
    const error = configError({ [name]: value });
    expect(error).toBeInstanceOf(ConfigError);
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe("ConfigError");
    expect(error.message).toContain(name);
  });

  it("names every bad variable at once", () => {
    const error = configError({ PORT: "abc", REDIS_URL: "http://x", LOG_LEVEL: "loud" });
    expect(error.message).toContain("PORT");
    expect(error.message).toContain("REDIS_URL");
    expect(error.message).toContain("LOG_LEVEL");
  });

  it("does not name variables that are fine", () => {
    const error = configError({ PORT: "abc", REDIS_URL: "redis://localhost:6379" });
    expect(error.message).not.toContain("REDIS_URL");
  });

  it("says what a good value looks like", () => {
    expect(configError({ PORT: "70000" }).message).toMatch(/PORT must be an integer between 0 and 65535/);
    expect(configError({ DELIVERY_TIMEOUT: "15" }).message).toMatch(/DELIVERY_TIMEOUT must be a duration/);
    expect(configError({ ALLOW_HTTP_URLS: "yes" }).message).toMatch(/ALLOW_HTTP_URLS must be true or false/);
    expect(configError({ REDIS_URL: "http://x" }).message).toMatch(
      /REDIS_URL must be a URL starting with redis:\/\/ or rediss:\/\//,
    );
    expect(configError({ LOG_LEVEL: "verbose" }).message).toBe(
      'Invalid configuration: LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent (got "verbose")',
    );
    expect(configError({ NODE_ENV: "prod" }).message).toBe(
      'Invalid configuration: NODE_ENV must be one of development, test, production (got "prod")',
    );
  });

  it.each([
    "short",
    "c2hvcnQ=",
    randomBytes(16).toString("base64"),
    randomBytes(33).toString("base64"),
    randomBytes(32).toString("hex"),
    // Node's base64 decoder would take these, but they are not what `openssl rand -base64 32` prints.
    `!!!!!!!!!!${"a".repeat(43)}`,
    randomBytes(32).toString("base64").slice(0, 43),
    randomBytes(32).toString("base64url"),
  ])("refuses SECRET_ENCRYPTION_KEY=%j without echoing it", (key) => {
    const error = configError({ SECRET_ENCRYPTION_KEY: key });
    expect(error.message).toContain("SECRET_ENCRYPTION_KEY");
    expect(error.message).not.toContain(key);
  });

  it("reads EGRESS_PROXY_URL as http://[user:password@]host:port, and refuses anything else without echoing it", () => {
    expect(loadConfig({ EGRESS_PROXY_URL: "http://egress:s3cret@proxy.internal:3128" }).worker.egressProxyUrl).toBe(
      "http://egress:s3cret@proxy.internal:3128",
    );
    expect(loadConfig({ EGRESS_PROXY_URL: "http://10.0.0.5:3128/" }).worker.egressProxyUrl).toBe(
      "http://10.0.0.5:3128/",
    );
    for (const url of [
      "https://proxy.internal:3128",
      "socks5://proxy.internal:1080",
      "http://proxy.internal",
      "http://u:hunter2@proxy.internal:3128/path",
      "proxy.internal:3128",
    ]) {
      const error = configError({ EGRESS_PROXY_URL: url });
      expect(error.message).toContain("EGRESS_PROXY_URL must be http://[user:password@]host:port");
      expect(error.message).not.toContain("hunter2");
    }
  });

  it("does not echo the password of a malformed DATABASE_URL", () => {
    const error = configError({ DATABASE_URL: "postgres://app:hunter2@db.internal:99999/hooks" });
    expect(error.message).toContain("DATABASE_URL");
    expect(error.message).not.toContain("hunter2");
  });
});
