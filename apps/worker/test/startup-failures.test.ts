import { createServer, type Server } from "node:net";
import { createTestDatabase, runFailingService, type TestDatabase, testEnv } from "@webhooks/testing";
import { afterAll, beforeAll, describe, expect, test } from "vitest";

/** A start-up failure is one line on stderr that names the setting to change, and exit code 1. */
let database: TestDatabase;
let holder: Server;
let heldPort: number;

beforeAll(async () => {
  database = await createTestDatabase();
  holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
  heldPort = (holder.address() as { port: number }).port;
});
afterAll(async () => {
  await new Promise<void>((resolve) => holder.close(() => resolve()));
  await database.drop();
});

describe("the worker's start-up failures", () => {
  test("a WORKER_METRICS_PORT in use is one line naming WORKER_METRICS_PORT", async () => {
    const result = await runFailingService("worker", testEnv(database.url, { WORKER_METRICS_PORT: String(heldPort) }));
    expect(result.code).toBe(1);
    const lines = result.stderr.trim().split("\n");
    expect(lines, result.stderr).toHaveLength(1);
    expect(lines[0]).toContain(`127.0.0.1:${heldPort}`);
    expect(lines[0]).toContain("EADDRINUSE");
    expect(lines[0]).toContain("set WORKER_METRICS_PORT to a free port");
    // It stopped before taking any job.
    expect(result.stdout).not.toContain("worker started");
  });
});
