import { Hono } from "hono";
import type { ApiDeps, ApiEnv } from "../http/types.ts";

const READINESS_TIMEOUT_MS = 2_000;

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  return Promise.race([work, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms).unref())]);
}

async function probe(check: () => Promise<unknown>): Promise<{ ok: boolean; error?: string }> {
  try {
    await withTimeout(check(), READINESS_TIMEOUT_MS);
    return { ok: true };
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
}

/** `/healthz`: the process is alive. `/readyz`: it can reach PostgreSQL and Redis. */
export function healthRoutes(deps: Pick<ApiDeps, "db" | "redis">) {
  return new Hono<ApiEnv>()
    .get("/healthz", (c) => c.json({ status: "ok" }))
    .get("/readyz", async (c) => {
      const [postgres, redis] = await Promise.all([probe(() => deps.db.$queryRaw`SELECT 1`), probe(() => deps.redis.ping())]);
      const ready = postgres.ok && redis.ok;
      return c.json({ status: ready ? "ready" : "unavailable", checks: { postgres, redis } }, ready ? 200 : 503);
    });
}
