import { DeadlineExceeded, withDeadline } from "@webhooks/core";
import { Hono } from "hono";
import type { ApiDeps, ApiEnv } from "../http/types.ts";

const READINESS_TIMEOUT_MS = 2_000;

interface Check {
  ok: boolean;
  error?: string;
}

/**
 * One dependency's readiness. The answer says only whether it answered: the probe is open to
 * anyone who reaches the API, and a driver's message names hosts, ports and statements. The
 * caller logs the error itself.
 */
async function probe(check: () => Promise<unknown>): Promise<{ check: Check; failure?: unknown }> {
  try {
    await withDeadline(check(), READINESS_TIMEOUT_MS, "the dependency");
    return { check: { ok: true } };
  } catch (error) {
    const reason = error instanceof DeadlineExceeded ? `no answer within ${READINESS_TIMEOUT_MS} ms` : "unreachable";
    return { check: { ok: false, error: reason }, failure: error };
  }
}

/** `/healthz`: the process is alive. `/readyz`: it can reach PostgreSQL and Redis. */
export function healthRoutes(deps: Pick<ApiDeps, "prisma" | "redis">) {
  return new Hono<ApiEnv>()
    .get("/healthz", (c) => c.json({ status: "ok" }))
    .get("/readyz", async (c) => {
      const [postgres, redis] = await Promise.all([
        probe(() => deps.prisma.$queryRaw`SELECT 1`),
        probe(() => deps.redis.ping()),
      ]);
      for (const [name, result] of [
        ["PostgreSQL", postgres],
        ["Redis", redis],
      ] as const) {
        if (result.failure !== undefined)
          c.var.logger.warn({ err: result.failure }, `readiness: ${name} is ${result.check.error}`);
      }
      const ready = postgres.check.ok && redis.check.ok;
      return c.json(
        { status: ready ? "ready" : "unavailable", checks: { postgres: postgres.check, redis: redis.check } },
        ready ? 200 : 503,
      );
    });
}
