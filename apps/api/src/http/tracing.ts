import { type Span, SpanKind, SpanStatusCode } from "@opentelemetry/api";
import type { Tracing } from "@webhooks/core";
import type { MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import type { ApiEnv } from "./types.ts";

/**
 * One server span per request (docs/operations.md#tracing), named by its method and route
 * template (`POST /v1/events`, `GET /v1/deliveries/:delivery_id`), continuing the caller's trace
 * when the request carries a `traceparent`. Its own traceparent is kept on the request, so that
 * what the request publishes carries it to the deliveries' attempts.
 * Installed only when tracing is on: off, a request pays nothing for it.
 */
export function traceRequests(tracing: Tracing): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const method = c.req.method;
    const span = tracing.tracer.startSpan(
      method,
      {
        kind: SpanKind.SERVER,
        attributes: {
          "http.request.method": method,
          "url.path": c.req.path,
          "url.scheme": new URL(c.req.url).protocol.slice(0, -1),
        },
      },
      tracing.contextOf(c.req.header("traceparent")),
    );
    c.set("span", span);
    c.set("traceparent", tracing.traceparentOf(span));
    try {
      await next();
    } finally {
      endServerSpan(span, method, routeOf(c), c.res.status, c.error);
    }
  };
}

function endServerSpan(span: Span, method: string, route: string | undefined, status: number, error: unknown) {
  if (route !== undefined) {
    span.updateName(`${method} ${route}`);
    span.setAttribute("http.route", route);
  }
  span.setAttribute("http.response.status_code", status);
  // A server span is in error for a 5xx only: a 4xx is the client's (OpenTelemetry's HTTP conventions).
  if (status >= 500) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: `HTTP ${status}` });
    span.setAttribute("error.type", String(status));
    if (error instanceof Error) span.recordException(error);
  }
  span.end();
}

/** The template of the route that matched (not the middleware's `*`); undefined when none did. */
function routeOf(c: Parameters<MiddlewareHandler<ApiEnv>>[0]): string | undefined {
  const routes = matchedRoutes(c);
  for (let i = routes.length - 1; i >= 0; i--) {
    const route = routes[i]!;
    if (route.method !== "ALL") return route.path;
  }
  return undefined;
}
