import type { MiddlewareHandler } from "hono";
import { ApiError } from "./api-error.ts";
import type { ApiEnv } from "./types.ts";

/**
 * Per-API-key token bucket: up to `perSecond` requests a second on average, with bursts of up to
 * one second's worth. The buckets live in this process, so with N API processes behind a load
 * balancer a key gets up to N times the rate; that keeps the check free of any network call.
 */
export function rateLimit(perSecond: number): MiddlewareHandler<ApiEnv> {
  const buckets = new Map<string, { tokens: number; updatedAt: number }>();
  return async (c, next) => {
    const key = c.var.apiKeyId;
    const now = performance.now();
    const bucket = buckets.get(key) ?? { tokens: perSecond, updatedAt: now };
    bucket.tokens = Math.min(perSecond, bucket.tokens + ((now - bucket.updatedAt) / 1000) * perSecond);
    bucket.updatedAt = now;
    buckets.set(key, bucket);
    if (bucket.tokens < 1) {
      const retryAfter = Math.max(1, Math.ceil((1 - bucket.tokens) / perSecond));
      throw new ApiError(
        429,
        "rate_limit_error",
        "rate_limited",
        `Too many requests: the limit is ${perSecond} per second`,
        undefined,
        {
          "retry-after": String(retryAfter),
        },
      );
    }
    bucket.tokens -= 1;
    await next();
  };
}
