import { type Logger, newId } from "@webhooks/core";
import type { MiddlewareHandler } from "hono";
import type { ApiEnv } from "./types.ts";

/**
 * Gives every request an id (the `request-id` header, repeated in error bodies) and a logger
 * that carries it, and logs one line per request when it is done.
 */
export function requestContext(logger: Logger): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const requestId = newId("request");
    const started = performance.now();
    c.set("requestId", requestId);
    c.set("logger", logger.child({ requestId }));
    c.header("request-id", requestId);
    await next();
    c.var.logger.info(
      {
        method: c.req.method,
        path: c.req.path,
        status: c.res.status,
        durationMs: Math.round((performance.now() - started) * 10) / 10,
      },
      "request",
    );
  };
}
