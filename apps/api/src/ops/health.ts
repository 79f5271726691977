import { withDeadline } from "@webhooks/core";
import { Hono } from "hono";
import type { ApiDeps, ApiEnv } from "../http/types.ts";

const READINESS_TIMEOUT_MS = 2_000;

async function probe(check: () => Promise<unknown>): Promise<{ ok: boolean; error?: string }> {
  try {
    await withDeadline(check(), READINESS_TIMEOUT_MS, "the service");
    return { ok: true };
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
}

/** `/healthz`: the process is alive. `/readyz`: it can reach PostgreSQL and Redis. */
export function healthRoutes(deps: Pick<ApiDeps, "prisma" | "redis">) {
  return new Hono<ApiEnv>()
    .get("/healthz", (c) => c.json({ status: "ok" }))
    .get("/readyz", async (c) => {
      const [postgres, redis] = await Promise.all([probe(() => deps.prisma.$queryRaw`SELECT 1`), probe(() => deps.redis.ping())]);
      const ready = postgres.ok && redis.ok;
      return c.json({ status: ready ? "ready" : "unavailable", checks: { postgres, redis } }, ready ? 200 : 503);
    });
}
