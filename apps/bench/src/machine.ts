import { spawnSync } from "node:child_process";
import { availableParallelism, cpus, platform, release, totalmem } from "node:os";
import { withClient } from "@webhooks/testing";
import { Redis } from "ioredis";
import { ROOT } from "./services.ts";
import { ADMIN_DATABASE_URL, REDIS_URL } from "./settings.ts";

export interface Machine {
  cores: number;
  cpuModel: string;
  memoryGb: number;
  node: string;
  postgres: string;
  redis: string;
  platform: string;
  /** The commit measured, and whether the product's files differed from it (the benchmark's own do not count). */
  commit: string;
}

/** What the figures were measured on, for the report's first lines. */
export async function describeMachine(): Promise<Machine> {
  const postgres = await withClient(ADMIN_DATABASE_URL, async (db) => {
    const { rows } = await db.query<{ server_version: string }>("SHOW server_version");
    return rows[0]?.server_version ?? "?";
  });
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  redis.on("error", () => {}); // failures surface through the commands' own errors
  const info = await redis.info("server").finally(() => redis.disconnect());
  return {
    cores: availableParallelism(),
    cpuModel: cpus()[0]?.model.trim() ?? "unknown CPU",
    memoryGb: Math.round(totalmem() / 2 ** 30),
    node: process.versions.node,
    postgres: `PostgreSQL ${postgres}`,
    redis: /redis_version:(\S+)/.exec(info)?.[1] ?? "?",
    platform: `${platform()} ${release()}`,
    commit: describeCommit(),
  };
}

function describeCommit(): string {
  const git = (...args: string[]) => spawnSync("git", ["-C", ROOT, ...args], { encoding: "utf8" });
  const head = git("log", "-1", "--format=%h %s");
  if (head.status !== 0) return "unknown (not a git checkout)";
  const changed = git("status", "--porcelain")
    .stdout.split("\n")
    .filter((line) => line.trim() !== "" && !/ (apps\/bench\/|BENCHMARKS\.md)/.test(line));
  return `${head.stdout.trim()}${changed.length ? ` (plus uncommitted changes to ${changed.length} file(s) of the product)` : ""}`;
}
