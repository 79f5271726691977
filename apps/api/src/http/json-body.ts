import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { ApiError } from "./api-error.ts";
import type { ApiEnv } from "./types.ts";

const jsonMediaType = /^application\/([\w.-]+\+)?json$/i;

/**
 * Request bodies (contract §2): over the limit is a 413, counted on the bytes received so that a
 * chunked body cannot slip past; a body that is not JSON is a 415; malformed JSON, or JSON that
 * is not an object, is a 400. An empty body is an empty object, so `PUT` with no body is a no-op.
 * Routes then validate the parsed object against their schemas.
 */
export function jsonBody(maxBytes: number): MiddlewareHandler<ApiEnv> {
  const limit = bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw new ApiError(413, "invalid_request_error", "body_too_large", `The request body must not exceed ${maxBytes} bytes`);
    },
  });

  const parse: MiddlewareHandler<ApiEnv> = async (c, next) => {
    const text = await c.req.text();
    const mediaType = (c.req.header("content-type") ?? "").split(";")[0]?.trim() ?? "";
    if (text.trim().length === 0) {
      // The route's JSON validator parses the cached text; an empty JSON body means {}.
      // (Hono caches bodies as promises, although its types say otherwise.)
      if (jsonMediaType.test(mediaType)) (c.req.bodyCache as Record<string, unknown>).text = Promise.resolve("{}");
      return next();
    }
    if (!jsonMediaType.test(mediaType)) {
      throw new ApiError(415, "invalid_request_error", "unsupported_media_type", "The request body must be JSON, sent with Content-Type: application/json");
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new ApiError(400, "invalid_request_error", "invalid_json", "The request body is not valid JSON");
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      throw new ApiError(400, "invalid_request_error", "invalid_json", "The request body must be a JSON object");
    }
    return next();
  };

  return async (c, next) => {
    if (c.req.method !== "POST" && c.req.method !== "PUT" && c.req.method !== "PATCH") return next();
    return limit(c, async () => {
      await parse(c, next);
    });
  };
}
