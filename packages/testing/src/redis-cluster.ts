import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/**
 * A Redis Cluster of the test's own: `masters` redis-servers on free loopback ports, no replicas,
 * nothing persisted, their node files in a temporary directory. `stop` kills them and removes
 * the directory; a cluster that fails to form is stopped before the error is thrown.
 */
export interface PrivateRedisCluster {
  /** The value for REDIS_CLUSTER_NODES. */
  nodes: string;
  ports: number[];
  stop(): Promise<void>;
}

/**
 * A port free on loopback whose cluster bus port (+10000) is free too, both below Linux's
 * ephemeral range (from 32768): ports in that range are handed out to the outgoing connections
 * of every test running in parallel, and one took a bus port between this check and the node's
 * bind (seen in CI: "bind: Address already in use" on the bus port).
 */
async function freeClusterPort(taken: Set<number>): Promise<number> {
  const listens = (port: number) =>
    new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once("error", () => resolve(false));
      server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
    });
  for (let tries = 0; tries < 200; tries++) {
    const port = 10_000 + Math.floor(Math.random() * 12_000);
    if (taken.has(port) || taken.has(port + 10_000)) continue;
    if ((await listens(port)) && (await listens(port + 10_000))) return port;
  }
  throw new Error("no free port pair for a cluster node");
}

async function startNode(port: number, dir: string): Promise<ChildProcess> {
  const child = spawn(
    "redis-server",
    [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--cluster-enabled",
      "yes",
      "--cluster-config-file",
      join(dir, `nodes-${port}.conf`),
      "--save",
      "",
      "--appendonly",
      "no",
      "--maxmemory-policy",
      "noeviction",
      "--daemonize",
      "no",
    ],
    { cwd: dir, stdio: ["ignore", "pipe", "pipe"] },
  );
  await new Promise<void>((resolve, reject) => {
    let output = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes("Ready to accept connections")) resolve();
    });
    child.once("error", (error) =>
      reject(new Error(`could not start redis-server (is it installed?): ${error.message}`)),
    );
    child.once("exit", (code) => reject(new Error(`redis-server on ${port} exited with ${code}: ${output}`)));
  });
  return child;
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGKILL");
  });
}

export async function startPrivateRedisCluster(
  masters = 3,
  options: { readyTimeoutMs?: number } = {},
): Promise<PrivateRedisCluster> {
  const dir = await mkdtemp(join(tmpdir(), "redis-cluster-"));
  const children: ChildProcess[] = [];
  const ports: number[] = [];
  const stop = async () => {
    await Promise.all(children.map(kill));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const taken = new Set<number>();
    for (let i = 0; i < masters; i++) {
      // A port found free can still be taken before the node binds it: try another pair then.
      for (let attempt = 1; ; attempt++) {
        const port = await freeClusterPort(taken);
        taken.add(port).add(port + 10_000);
        try {
          children.push(await startNode(port, dir));
          ports.push(port);
          break;
        } catch (error) {
          if (attempt >= 3 || !String(error).includes("Address already in use")) throw error;
        }
      }
    }
    await run(
      "redis-cli",
      ["--cluster", "create", ...ports.map((port) => `127.0.0.1:${port}`), "--cluster-replicas", "0", "--cluster-yes"],
      { timeout: 30_000 },
    );
    const deadline = Date.now() + (options.readyTimeoutMs ?? 30_000);
    for (const port of ports) {
      for (;;) {
        const { stdout } = await run("redis-cli", ["-p", String(port), "cluster", "info"], { timeout: 5_000 });
        if (stdout.includes("cluster_state:ok")) break;
        if (Date.now() > deadline) throw new Error(`the cluster node on ${port} is not ready:\n${stdout}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { nodes: ports.map((port) => `127.0.0.1:${port}`).join(","), ports, stop };
}
