import { spawnSync } from "node:child_process";
import { availableParallelism, cpus, release, totalmem } from "node:os";
import { withClient } from "@webhooks/testing";
import { Redis } from "ioredis";
import { ADMIN_DATABASE_URL, REDIS_URL, ROOT } from "./config.ts";

/** One line on what the figures were measured on: the machine, the versions and the commit. */
export async function describeMachine(): Promise<string> {
  const { rows } = await withClient(ADMIN_DATABASE_URL, (db) => db.query("SHOW server_version"));
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 }).on("error", () => {}); // errors reach the command
  const info = await redis.info("server").finally(() => redis.disconnect());
  const git = (...args: string[]) => spawnSync("git", ["-C", ROOT, ...args], { encoding: "utf8" }).stdout.trim();
  // The product's changes only: the bench's own files and its report do not change what is measured.
  const changed = git("status", "--porcelain")
    .split("\n")
    .filter((line) => line && !/ (apps\/bench\/|BENCHMARKS)/.test(line));
  const commit = `${git("log", "-1", "--format=%h %s").slice(0, 72)}${changed.length ? ` (and ${changed.length} changed files)` : ""}`;
  const machine = `${availableParallelism()} cores (${cpus()[0]?.model.trim()}), ${Math.round(totalmem() / 2 ** 30)} GB, Linux ${release()}`;
  return `${machine}, Node ${process.versions.node}, PostgreSQL ${rows[0].server_version}, Redis ${/redis_version:(\S+)/.exec(info)?.[1]}; commit ${commit}`;
}
