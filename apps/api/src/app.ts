import { OpenAPIHono } from "@hono/zod-openapi";
import { portalRoutes } from "@webhooks/portal";
import { deliveryRoutes } from "./deliveries/routes.ts";
import { eventTypeRoutes } from "./event-types/routes.ts";
import { eventRoutes } from "./events/routes.ts";
import { requireApiKey, requireMetricsToken } from "./http/auth.ts";
import { AuthFailureThrottle } from "./http/auth-throttle.ts";
import { handleError } from "./http/errors.ts";
import { jsonBody } from "./http/json-body.ts";
import { rateLimit } from "./http/rate-limit.ts";
import { requestContext } from "./http/request-context.ts";
import { traceRequests } from "./http/tracing.ts";
import type { ApiDeps, ApiEnv } from "./http/types.ts";
import { notFoundOrWrongMethod } from "./http/unmatched-route.ts";
import { ADMIN_BASE_PATH, adminRoutes } from "./ops/admin.ts";
import { docsRoutes } from "./ops/docs.ts";
import { healthRoutes } from "./ops/health.ts";
import { createApiMetrics } from "./ops/metrics.ts";
import { portalSessionRoutes } from "./portal-sessions/routes.ts";
import { subscriptionStatsRoutes } from "./subscription-stats/routes.ts";
import { subscriptionRoutes } from "./subscriptions/routes.ts";

/**
 * The API app: middleware, the resources under /v1, and the operational routes. Built from
 * its dependencies so that tests can run it against their own database and queue.
 */
export function createApp(deps: ApiDeps) {
  const app = new OpenAPIHono<ApiEnv>();
  const metrics = createApiMetrics(deps.queue, deps.prisma);
  const authThrottle = new AuthFailureThrottle();

  if (deps.tracing) app.use("*", traceRequests(deps.tracing));
  app.use("*", requestContext(deps.logger));
  app.use("*", metrics.measure);
  app.use("/v1/*", requireApiKey(deps.authenticator, authThrottle));
  if (deps.config.rateLimitPerSecond > 0) app.use("/v1/*", rateLimit(deps.config.rateLimitPerSecond));
  app.use("/v1/*", jsonBody(deps.config.bodyLimitBytes));

  app.route("/", subscriptionRoutes(deps));
  app.route("/", subscriptionStatsRoutes(deps));
  app.route("/", eventRoutes(deps));
  app.route("/", eventTypeRoutes(deps));
  app.route("/", deliveryRoutes(deps));
  app.route("/", portalSessionRoutes(deps));

  app.openAPIRegistry.registerComponent("securitySchemes", "apiKey", {
    type: "http",
    scheme: "bearer",
    description:
      "An API key: from API_KEYS, or created with `npm run keys -- create` (with `--tenant T`, scoped to one tenant); " +
      "or a portal session's token (POST /v1/portal_sessions), scoped to its tenant until it expires.",
  });
  app.doc31("/openapi.json", {
    openapi: "3.1.0",
    info: {
      title: "Webhook Delivery Service API",
      version: "1.0.0",
      description: "Subscriptions, events and the delivery log. Errors share one shape; lists page by cursor.",
      license: { name: "Apache-2.0", url: "https://www.apache.org/licenses/LICENSE-2.0" },
      contact: { name: "The webhook-delivery-service authors" },
    },
    // Relative: the server that serves this document, whatever its host and port (http://localhost:3000 under `npm start`).
    servers: [{ url: "/", description: "The server that serves this document" }],
    tags: [
      {
        name: "Subscriptions",
        description: "Endpoints that receive webhooks: the event types each wants, its limits and its health.",
      },
      {
        name: "Events",
        description:
          "What happened in your application; each event is delivered to every matching active subscription.",
      },
      {
        name: "Event types",
        description:
          "The catalog of the event types you publish: what each means, the JSON Schema its data must match, examples.",
      },
      {
        name: "Deliveries",
        description: "The delivery log: one delivery per event and subscription, with every attempt, and resends.",
      },
      { name: "Portal sessions", description: "Short-lived links that open the customer portal for one tenant." },
    ],
    security: [{ apiKey: [] }],
  });
  app.route("/", docsRoutes());
  // The customer portal: a page that uses the /v1 routes above with a portal session's token.
  app.route("/", portalRoutes(deps.config.portal));
  app.route("/", healthRoutes(deps));
  if (deps.config.metricsToken) app.use("/metrics", requireMetricsToken(deps.config.metricsToken, authThrottle));
  app.get("/metrics", async (c) =>
    c.body(await metrics.registry.metrics(), 200, { "content-type": metrics.registry.contentType }),
  );
  if (deps.config.admin) app.route(ADMIN_BASE_PATH, adminRoutes(deps.queue, deps.config.admin, authThrottle));

  app.notFound(notFoundOrWrongMethod(app.routes));
  app.onError(handleError);
  return app;
}
