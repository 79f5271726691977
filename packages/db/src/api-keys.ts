import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { isId, NotFoundError, newId } from "@webhooks/core";
import type { PrismaClientOrTransaction } from "./client.ts";

/**
 * API keys (docs/api.md#authentication): `whk_` + 32 random bytes in base64url. Only a SHA-256 hash
 * is stored; a fast hash is right for keys this long, which cannot be guessed the way passwords
 * can. The first characters are kept as a display prefix, which is also how a presented key finds
 * its row before the hashes are compared in constant time.
 */
const KEY_PREFIX = "whk_";
const DISPLAY_PREFIX_LENGTH = 12;

export interface ApiKeyRecord {
  id: string;
  name: string;
  prefix: string;
  createdAt: Date;
  revokedAt: Date | null;
  /** The tenant the key is scoped to (docs/api.md#tenant-scoped-api-keys), or null for an unscoped key. */
  tenantId: string | null;
}

/** A live stored key, as the authenticator needs it. */
export interface LiveApiKey {
  id: string;
  tenantId: string | null;
}

const keyFields = {
  id: true,
  name: true,
  prefix: true,
  createdAt: true,
  revokedAt: true,
  tenantId: true,
} as const satisfies Record<keyof ApiKeyRecord, true>;

export function hashApiKey(key: string): Buffer {
  return createHash("sha256").update(key).digest();
}

export async function createApiKey(
  ctx: { db: PrismaClientOrTransaction },
  input: { name: string; tenantId?: string | null | undefined },
): Promise<{ key: string; record: ApiKeyRecord }> {
  const key = KEY_PREFIX + randomBytes(32).toString("base64url");
  const record = await ctx.db.apiKey.create({
    data: {
      id: newId("apiKey"),
      name: input.name,
      prefix: key.slice(0, DISPLAY_PREFIX_LENGTH),
      hash: hashApiKey(key).toString("hex"),
      tenantId: input.tenantId ?? null,
    },
    select: keyFields,
  });
  return { key, record };
}

export async function listApiKeys(ctx: { db: PrismaClientOrTransaction }): Promise<ApiKeyRecord[]> {
  return ctx.db.apiKey.findMany({
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    select: keyFields,
  });
}

export async function revokeApiKey(ctx: { db: PrismaClientOrTransaction }, id: string): Promise<ApiKeyRecord> {
  if (!isId("apiKey", id)) throw new NotFoundError(`No such API key: ${id}`, "id");
  const { count } = await ctx.db.apiKey.updateMany({ where: { id, revokedAt: null }, data: { revokedAt: new Date() } });
  const record = await ctx.db.apiKey.findUnique({
    where: { id },
    select: keyFields,
  });
  if (!record) throw new NotFoundError(`No such API key: ${id}`, "id");
  if (count === 0 && record.revokedAt === null) throw new Error("revocation did not apply");
  return record;
}

/** The live stored key matching `key` (its id and tenant scope), or undefined. */
export async function findLiveApiKey(
  ctx: { db: PrismaClientOrTransaction },
  key: string,
): Promise<LiveApiKey | undefined> {
  if (!key.startsWith(KEY_PREFIX) || key.length < DISPLAY_PREFIX_LENGTH) return undefined;
  const candidates = await ctx.db.apiKey.findMany({
    where: { prefix: key.slice(0, DISPLAY_PREFIX_LENGTH), revokedAt: null },
    select: { id: true, hash: true, tenantId: true },
  });
  const presented = hashApiKey(key);
  const found = candidates.find((candidate) => timingSafeEqual(Buffer.from(candidate.hash, "hex"), presented));
  return found === undefined ? undefined : { id: found.id, tenantId: found.tenantId };
}
