import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { PrismaClientOrTransaction } from "./client.ts";

/**
 * Customer portal sessions (docs/api.md#portal-sessions): a bearer token scoped to one tenant until
 * it expires. `whps_` + 32 random bytes in base64url, a prefix distinct from API keys' `whk_` so
 * that the authenticator knows which table to ask, and so that a leaked token is recognisable as a
 * short-lived portal one. As for API keys, only its SHA-256 is stored; a fast hash suits a 256-bit
 * random token, which cannot be guessed the way a password can. The row is found by its hash
 * (unique index), so no comparison of secrets happens outside PostgreSQL's index lookup, and what
 * that lookup's timing could reveal is a hash, not the token. The row's id is internal (no response
 * shows it), so a random UUID serves.
 */
export const PORTAL_TOKEN_PREFIX = "whps_";
export const PORTAL_TOKEN_FORMAT = /^whps_[A-Za-z0-9_-]{43}$/;

export interface PortalSessionRecord {
  id: string;
  tenantId: string;
  expiresAt: Date;
  createdAt: Date;
}

function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/**
 * A new session for `tenantId`, valid for `expiresInMs` from PostgreSQL's clock (the one every
 * other timestamp of the service comes from). The token is returned once and never stored.
 */
export async function createPortalSession(
  ctx: { db: PrismaClientOrTransaction },
  input: { tenantId: string; expiresInMs: number; apiKeyId: string },
): Promise<{ token: string; session: PortalSessionRecord }> {
  const token = PORTAL_TOKEN_PREFIX + randomBytes(32).toString("base64url");
  const [session] = await ctx.db.$queryRaw<PortalSessionRecord[]>`
    INSERT INTO portal_sessions (id, tenant_id, token_hash, expires_at, api_key_id)
    VALUES (${`ps_${randomUUID()}`}, ${input.tenantId}, ${hashToken(token)}, now() + ${input.expiresInMs}::int * interval '1 millisecond', ${input.apiKeyId})
    RETURNING id, tenant_id AS "tenantId", expires_at AS "expiresAt", created_at AS "createdAt"`;
  if (!session) throw new Error("the portal session was not stored");
  return { token, session };
}

/**
 * The session a token names, expired or not (the caller tells the two apart), or undefined; also
 * undefined once the API key that created it has been revoked, since revoking a key must end
 * everything it handed out. A session made with a static key (`api_key_id` "static", no row in
 * api_keys) lasts until it expires. One statement: the token hash's unique index, then api_keys
 * by its primary key.
 */
export async function findPortalSession(
  ctx: { db: PrismaClientOrTransaction },
  token: string,
): Promise<PortalSessionRecord | undefined> {
  if (!PORTAL_TOKEN_FORMAT.test(token)) return undefined;
  const [session] = await ctx.db.$queryRaw<PortalSessionRecord[]>`
    SELECT s.id, s.tenant_id AS "tenantId", s.expires_at AS "expiresAt", s.created_at AS "createdAt"
    FROM portal_sessions s
    WHERE s.token_hash = ${hashToken(token)}
      AND NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.id = s.api_key_id AND k.revoked_at IS NOT NULL)`;
  return session;
}
