import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createRedisConnection, waitUntilConnected } from "@webhooks/queue";
import {
  databaseUrl,
  type OtlpSink,
  REDIS_URL,
  type ServiceProcess,
  spawnService,
  startOtlpSink,
  testEnv,
  waitFor,
  withClient,
} from "@webhooks/testing";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { buildService } from "../src/build.ts";
import { smokeTest } from "../src/smoke.ts";
import { probes, ROOT } from "./manifests.ts";

/**
 * The production build, run as production runs it: `node apps/<app>/dist/main.js`, without tsx.
 * It builds into the repository's own apps/<app>/dist (the layout the image copies), starts a
 * worker and an API on a database that does not exist yet (so the migrations must be found and
 * applied from the build), and holds them to the same smoke test as the container image.
 */
const ADMIN = { username: "admin", password: randomBytes(12).toString("hex") };
const database = `webhooks_test_compiled_${randomBytes(6).toString("hex")}`;
const env = testEnv(databaseUrl(database), {
  NODE_ENV: "production",
  SECRET_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
  // The smoke test's receiver is on loopback, over plain HTTP.
  ALLOW_HTTP_URLS: "true",
  ALLOW_PRIVATE_DESTINATIONS: "true",
  ADMIN_USERNAME: ADMIN.username,
  ADMIN_PASSWORD: ADMIN.password,
  LOG_LEVEL: "info",
  // Traces on (docs/operations.md#tracing), so that the bundled SDK runs too: http/protobuf, the default.
  OTEL_BSP_SCHEDULE_DELAY: "100",
});
let sink: OtlpSink | undefined;
let worker: ServiceProcess | undefined;
let api: ServiceProcess | undefined;

beforeAll(async () => {
  sink = await startOtlpSink();
  env.OTEL_EXPORTER_OTLP_ENDPOINT = sink.endpoint;
  await buildService(ROOT);
});

afterAll(async () => {
  await sink?.close();
  for (const service of [api, worker]) {
    if (service && service.child.exitCode === null) {
      service.kill("SIGKILL");
      await service.exited;
    }
  }
  const redis = createRedisConnection(REDIS_URL, "producer");
  await waitUntilConnected(redis);
  const keys = await redis.keys(`${env.QUEUE_PREFIX}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
  await withClient(databaseUrl("postgres"), (client) =>
    client.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`),
  );
});

/** The port a service logged it listens on (it was given port 0). */
function loggedPort(service: ServiceProcess, message: string, field: string): number {
  const line = service
    .output()
    .split("\n")
    .find((text) => text.includes(`"msg":"${message}"`));
  const port = line ? (JSON.parse(line) as Record<string, unknown>)[field] : undefined;
  if (typeof port !== "number") throw new Error(`no ${field} in the line "${message}":\n${service.output()}`);
  return port;
}

describe("the compiled build", () => {
  test("has source maps and loads nothing from TypeScript", async () => {
    const launcher = await readFile(`${ROOT}apps/api/dist/main.js`, "utf8");
    expect(launcher).toContain("process.setSourceMapsEnabled(true)");
    const bundle = await readFile(`${ROOT}apps/api/dist/main.bundle.js`, "utf8");
    expect(bundle).toMatch(/\/\/# sourceMappingURL=main\.bundle\.js\.map\s*$/);
    expect(bundle).not.toMatch(/from "(tsx|typescript|esbuild|vitest)"/);
    const map = JSON.parse(await readFile(`${ROOT}apps/api/dist/main.bundle.js.map`, "utf8")) as { sources: string[] };
    expect(map.sources).toContain("../src/main.ts");
    expect(map.sources).toContain("../../../packages/db/src/migrate.ts");
  });

  test("migrates a new database, delivers a published event signed, serves its pages, and stops on SIGTERM", async () => {
    worker = await spawnService("worker", env, { compiled: true, timeoutMs: 60_000 });
    expect(worker.output()).toContain("applied migration");
    api = await spawnService("api", env, { compiled: true, timeoutMs: 60_000 });

    const apiUrl = `http://127.0.0.1:${loggedPort(api, "API listening", "port")}`;
    const workerUrl = `http://127.0.0.1:${loggedPort(worker, "worker started", "metricsPort")}`;
    const steps = await smokeTest({ apiUrl, workerUrl, apiKey: env.API_KEYS!, admin: ADMIN });
    expect(steps.map((step) => step.name)).toContain("publish -> signed delivery");
    // Both processes export their spans: the publish's and its attempt's.
    const exported = () => Buffer.concat(sink!.requests.map((request) => request.body));
    await waitFor(() => exported().includes("POST /v1/events") && exported().includes("webhook.attempt"), {
      timeoutMs: 30_000,
      what: "the spans of the publish and of its attempt",
    });
    expect(sink!.requests.every((request) => request.contentType === "application/x-protobuf")).toBe(true);

    // Every probe of the Kubernetes manifests answers 200 on the process it probes.
    for (const probe of await probes()) {
      const base = probe.deployment === "webhooks-api" ? apiUrl : workerUrl;
      const response = await fetch(`${base}${probe.path}`);
      expect(response.status, `${probe.deployment} ${probe.kind} ${probe.path}`).toBe(200);
    }

    api.kill("SIGTERM");
    worker.kill("SIGTERM");
    expect(await api.exited).toBe(0);
    expect(await worker.exited).toBe(0);
    expect(worker.output()).toContain("worker stopped");
  });
});
