import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createRedisConnection, waitUntilConnected } from "@webhooks/queue";
import { REDIS_URL, waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { apiTest } from "./fixtures.ts";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** The environment `npm start` runs with (a database of its own); its queue's keys are removed after. */
const test = apiTest({ env: { LOG_LEVEL: "info" } }).extend(
  "serviceEnv",
  { scope: "file" },
  async ({ env }, { onCleanup }) => {
    onCleanup(async () => {
      // The worker made its queue's keys under this test's prefix: leave none behind.
      const redis = createRedisConnection(REDIS_URL, "producer");
      await waitUntilConnected(redis);
      const keys = await redis.keys(`${env.QUEUE_PREFIX}:*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    });
    return env;
  },
);

describe("npm start", () => {
  test("runs the API and a worker, and stops both cleanly on Ctrl-C, exiting 0", async ({ serviceEnv: env }) => {
    const inherited = Object.fromEntries(
      Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith("npm_")),
    );
    // A process group of its own, so that the test can do what a terminal does on Ctrl-C:
    // send SIGINT to every process of the foreground group at once.
    const child = spawn("npm", ["start"], {
      cwd: ROOT,
      env: { ...inherited, ...env },
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | string>((resolve) =>
      child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")),
    );
    try {
      await waitFor(() => output.includes("API listening") && output.includes("worker started"), {
        timeoutMs: 45_000,
        what: `npm start to be ready:\n${output}`,
      });
      process.kill(-child.pid!, "SIGINT");
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, "SIGKILL");
    }
    expect(output).toMatch(/\[api\] .*API listening/);
    expect(output).toMatch(/\[worker\] .*worker started/);
    expect(output).toMatch(/\[api\] .*exited with code 0/);
    expect(output).toMatch(/\[worker\] .*exited with code 0/);
    expect(output).not.toMatch(/SIGINT\n|SIGTERM|Tasks:|ERR!|npm error/);
  });
});
