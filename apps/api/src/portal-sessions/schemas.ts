import { z } from "@hono/zod-openapi";
import { parseDuration } from "@webhooks/core";
import type { PortalSessionRecord } from "@webhooks/db";
import { isoTimestamp, tenantIdField } from "../http/schemas.ts";

const MIN_EXPIRES_IN_MS = 60_000;
const MAX_EXPIRES_IN_MS = 24 * 3_600_000;
const expiresInMessage = "expires_in must be a duration from 1m to 24h, such as 15m, 1h or 24h";

export const DEFAULT_EXPIRES_IN = "1h";

/** docs/api.md#portal-sessions: `1m` to `24h`, in the durations every other setting uses (packages/core's parseDuration). */
export function expiresInMs(text: string): number | undefined {
  const ms = parseDuration(text);
  return ms !== undefined && ms >= MIN_EXPIRES_IN_MS && ms <= MAX_EXPIRES_IN_MS ? ms : undefined;
}

export const createPortalSessionBody = z
  .strictObject({
    tenant_id: tenantIdField(
      "The tenant whose portal this opens: the session sees and changes only its subscriptions and deliveries.",
    ),
    expires_in: z
      .string({ error: expiresInMessage })
      .refine((text) => expiresInMs(text) !== undefined, expiresInMessage)
      .optional()
      .openapi({
        default: DEFAULT_EXPIRES_IN,
        description:
          "How long the token stays valid: a duration from `1m` to `24h` (`m`, `h`, or `s`/`ms` in that range).",
        example: "1h",
      }),
  })
  .openapi("CreatePortalSession");

export const portalSessionSchema = z
  .object({
    object: z.literal("portal_session"),
    tenant_id: z.string().openapi({ example: "acme" }),
    token: z.string().openapi({
      description:
        "A bearer credential for the public /v1 API, scoped to the tenant until expires_at. Returned once; it is stored only as a hash.",
      example: "whps_4hT0m9kS2c1sQ7vJbXgLzE8nR5yWuPaKdF3iO6tHqVw",
    }),
    url: z.string().openapi({
      description:
        "Opens the customer portal with this session: PUBLIC_URL/portal#token=... (the token in the fragment, which browsers never send to a server).",
      example: "https://webhooks.example.com/portal#token=whps_4hT0m9kS2c1sQ7vJbXgLzE8nR5yWuPaKdF3iO6tHqVw",
    }),
    expires_at: z.string().openapi({ format: "date-time" }),
  })
  .openapi("PortalSession");

export function toPortalSessionJson(session: PortalSessionRecord, token: string, publicUrl: string) {
  return {
    object: "portal_session" as const,
    tenant_id: session.tenantId,
    token,
    url: `${publicUrl}/portal#token=${token}`,
    expires_at: isoTimestamp(session.expiresAt),
  };
}

// The route's request and response types, for the tests and any TypeScript caller.
export type CreatePortalSessionRequest = z.input<typeof createPortalSessionBody>;
export type PortalSessionResponse = z.output<typeof portalSessionSchema>;
