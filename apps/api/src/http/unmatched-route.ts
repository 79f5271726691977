import type { NotFoundHandler } from "hono";
import { ApiError } from "./api-error.ts";
import { respond } from "./errors.ts";
import type { ApiEnv } from "./types.ts";

/**
 * 404 for paths we do not serve, 405 (with Allow) for paths we serve with other methods.
 * `routes` are the app's method + path pairs, read once the app is assembled. A route that takes
 * the request's method and still found nothing (an unknown asset name) is a 404 too. Paths match
 * as the router matches them: `/v1/events/` is not `/v1/events`.
 */
export function notFoundOrWrongMethod(routes: { method: string; path: string }[]): NotFoundHandler<ApiEnv> {
  const patterns = routes
    .filter((route) => route.method !== "ALL" && !route.path.includes("*"))
    .map((route) => ({
      method: route.method,
      regex: new RegExp(`^${route.path.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/:[A-Za-z_]+/g, "[^/]+")}$`),
    }));
  return (c) => {
    const allowed = [...new Set(patterns.filter((p) => p.regex.test(c.req.path)).map((p) => p.method))];
    if (allowed.includes("GET")) allowed.push("HEAD");
    if (allowed.length > 0 && !allowed.includes(c.req.method)) {
      return respond(
        c,
        new ApiError(
          405,
          "invalid_request_error",
          "method_not_allowed",
          `${c.req.method} is not allowed on ${c.req.path}; use ${allowed.join(", ")}`,
          undefined,
          {
            allow: allowed.join(", "),
          },
        ),
      );
    }
    return respond(
      c,
      new ApiError(
        404,
        "invalid_request_error",
        "resource_missing",
        `Unrecognized request URL: ${c.req.method} ${c.req.path}`,
      ),
    );
  };
}
