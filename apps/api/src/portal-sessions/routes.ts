import { createRoute } from "@hono/zod-openapi";
import { createPortalSession, requireUnscoped } from "@webhooks/db";
import { newRouter } from "../http/router.ts";
import { jsonResponse, noQueryParameters, operationErrors } from "../http/schemas.ts";
import type { ApiDeps } from "../http/types.ts";
import {
  createPortalSessionBody,
  DEFAULT_EXPIRES_IN,
  expiresInMs,
  portalSessionSchema,
  toPortalSessionJson,
} from "./schemas.ts";

const createRouteDef = createRoute({
  method: "post",
  path: "/v1/portal_sessions",
  operationId: "createPortalSession",
  tags: ["Portal sessions"],
  summary: "Create a customer portal session",
  description:
    "A short-lived token scoped to one tenant, and the link that opens the customer portal with it. Create one on your " +
    "server when your customer asks for their webhook settings, and redirect them to `url`. Only an unscoped API key may " +
    "create sessions (403 otherwise). The token works as a tenant-scoped key on the /v1 API until expires_at (then 401), " +
    "except that it cannot publish events nor create sessions.",
  request: {
    query: noQueryParameters,
    body: { required: true, content: { "application/json": { schema: createPortalSessionBody } } },
  },
  responses: {
    201: jsonResponse(portalSessionSchema, "The session, with its token (shown once) and portal url"),
    ...operationErrors(403, 413, 415),
  },
});

export function portalSessionRoutes(deps: ApiDeps) {
  return newRouter().openapi(createRouteDef, async (c) => {
    requireUnscoped(c.var.principal.scope, "create portal sessions");
    const body = c.req.valid("json");
    const { token, session } = await createPortalSession(
      { db: deps.prisma },
      {
        tenantId: body.tenant_id,
        expiresInMs: expiresInMs(body.expires_in ?? DEFAULT_EXPIRES_IN)!,
        apiKeyId: c.var.principal.keyId,
      },
    );
    // The token is a credential: it is in this response body only, never in a log line.
    return c.json(toPortalSessionJson(session, token, deps.config.publicUrl), 201);
  });
}
