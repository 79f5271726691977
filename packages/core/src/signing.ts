import { createHmac, randomBytes } from "node:crypto";

/**
 * Standard Webhooks signing (docs/receiving.md#the-request). The secret is `whsec_` + base64 of 32
 * random bytes; the signature is HMAC-SHA256 over `{id}.{timestamp}.{body}` keyed with the decoded
 * bytes. Written with node:crypto rather than the `standardwebhooks` package because this runs once
 * per attempt on the hot path and that package hashes in JavaScript; tests verify every signature
 * with the official package.
 */
const SECRET_PREFIX = "whsec_";

export function generateSigningSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString("base64");
}

export function decodeSigningSecret(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, "base64");
}

export interface SignedHeaders {
  "webhook-id": string;
  "webhook-timestamp": string;
  "webhook-signature": string;
}

/**
 * Signs with each key, the current secret first: during a rotation's overlap
 * (docs/api.md#rotate-the-signing-secret) the header carries both signatures, space-separated, and
 * a receiver accepts the message if any of them verifies with the secret it has.
 */
export function signWebhook(input: {
  secretKeys: readonly Buffer[];
  messageId: string;
  timestamp: Date;
  body: string;
}): SignedHeaders {
  if (input.secretKeys.length === 0) throw new Error("signWebhook needs at least one key");
  const seconds = Math.floor(input.timestamp.getTime() / 1000).toString();
  const content = `${input.messageId}.${seconds}.${input.body}`;
  const signatures = input.secretKeys.map((key) => `v1,${createHmac("sha256", key).update(content).digest("base64")}`);
  return {
    "webhook-id": input.messageId,
    "webhook-timestamp": seconds,
    "webhook-signature": signatures.join(" "),
  };
}
