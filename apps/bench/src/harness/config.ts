import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";

/** The repository's root, with a trailing slash. */
export const ROOT = fileURLToPath(new URL("../../../../", import.meta.url));

/** Unique per run: it prefixes this run's databases and Redis keys, so they never collide and are easy to delete. */
export const RUN_ID = randomBytes(4).toString("hex");
export const RUN_PREFIX = `bench-${RUN_ID}`;

/** A static key the API accepts through API_KEYS. */
export const BENCH_API_KEY = `bench_${randomBytes(24).toString("hex")}`;

export const ADMIN_DATABASE_URL =
  process.env.BENCH_ADMIN_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";
export const REDIS_URL = process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379";
