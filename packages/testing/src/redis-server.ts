import { type ChildProcess, spawn } from "node:child_process";
import { freePort } from "./ports.ts";

/**
 * A redis-server of the test's own, on a free loopback port, for tests that flush Redis or take
 * it down: doing that to the shared one would break every other test running at the same time.
 */
export interface PrivateRedis {
  url: string;
  port: number;
  start(): Promise<void>;
  /** Stops it as a crash would, keeping nothing (it never persists). */
  stop(): Promise<void>;
  /** Freezes it (SIGSTOP): connections stay open and nothing is answered, as with a stalled server or a network that drops packets. */
  pause(): void;
  /** Lets a paused server go on (SIGCONT). */
  resume(): void;
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const redis: PrivateRedis = {
    url: `redis://127.0.0.1:${port}`,
    port,
    async start() {
      const process = spawn(
        "redis-server",
        [
          "--port",
          String(port),
          "--bind",
          "127.0.0.1",
          "--save",
          "",
          "--appendonly",
          "no",
          "--maxmemory-policy",
          "noeviction",
        ],
        {
          stdio: ["ignore", "pipe", "pipe"],
        },
      );
      child = process;
      await new Promise<void>((resolve, reject) => {
        let output = "";
        const onData = (chunk: Buffer) => {
          output += chunk.toString();
          if (output.includes("Ready to accept connections")) resolve();
        };
        process.stdout!.on("data", onData);
        process.once("error", (error) =>
          reject(new Error(`could not start redis-server (is it installed?): ${error.message}`)),
        );
        process.once("exit", (code) => reject(new Error(`redis-server exited with ${code}: ${output}`)));
      });
    },
    pause() {
      child?.kill("SIGSTOP");
    },
    resume() {
      child?.kill("SIGCONT");
    },
    async stop() {
      const process = child;
      if (!process || process.exitCode !== null || process.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        process.once("exit", () => resolve());
        process.kill("SIGKILL");
      });
    },
  };
  await redis.start();
  return redis;
}
