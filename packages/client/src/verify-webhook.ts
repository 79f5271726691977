import { createPublicKey, type KeyObject, verify } from "node:crypto";
import { Webhook, WebhookVerificationError } from "standardwebhooks";

/** What a receiver gets in the body of every webhook (docs/receiving.md#the-request). */
export interface WebhookPayload {
  type: string;
  /** When the event was published, ISO 8601. */
  timestamp: string;
  data: Record<string, unknown>;
}

export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

const PUBLIC_KEY_PREFIX = "whpk_";
/** How far `webhook-timestamp` may be from this clock, either way: the libraries' 5 minutes. */
const TOLERANCE_SECONDS = 5 * 60;
/** The DER header of an ed25519 public key in SPKI form (RFC 8410); the 32 raw key bytes follow it. */
const SPKI_ED25519_HEADER = Buffer.from("302a300506032b6570032100", "hex");

/**
 * Checks a webhook's signature and timestamp and returns its parsed body
 * (docs/receiving.md#verifying-the-signature). With a secret (`whsec_…`, an hmac-sha256
 * subscription) the official `standardwebhooks` library checks its `v1` signatures; with a public
 * key (`whpk_…`, an ed25519 subscription) node:crypto checks its `v1a` signatures, which that
 * library does not know, by the same rules. `body` must be the raw body as received: parsing and
 * re-serialising JSON changes the bytes that were signed. Throws WebhookVerificationError when the
 * signature, the timestamp (more than 5 minutes off) or a header is wrong.
 */
export function verifyWebhook(
  secretOrPublicKey: string,
  headers: WebhookHeaders,
  body: string | Buffer,
): WebhookPayload {
  const flat: Record<string, string> = {};
  const entries = headers instanceof Headers ? headers.entries() : Object.entries(headers);
  for (const [name, value] of entries) {
    if (value !== undefined) flat[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value;
  }
  if (secretOrPublicKey.startsWith(PUBLIC_KEY_PREFIX)) return verifyEd25519(secretOrPublicKey, flat, body);
  return new Webhook(secretOrPublicKey).verify(body, flat) as WebhookPayload;
}

/** `v1a`: accepted when any `v1a,` entry of the header verifies with the key, as `v1` is with any of its entries. */
function verifyEd25519(publicKey: string, headers: Record<string, string>, body: string | Buffer): WebhookPayload {
  const key = decodePublicKey(publicKey);
  const id = headers["webhook-id"];
  const timestamp = headers["webhook-timestamp"];
  const signatures = headers["webhook-signature"];
  if (!id || !timestamp || !signatures) throw new WebhookVerificationError("Missing required headers");
  if (!/^\d+$/.test(timestamp)) throw new WebhookVerificationError("Invalid Signature Headers");
  const now = Math.floor(Date.now() / 1000);
  if (now - Number(timestamp) > TOLERANCE_SECONDS) throw new WebhookVerificationError("Message timestamp too old");
  if (Number(timestamp) - now > TOLERANCE_SECONDS) throw new WebhookVerificationError("Message timestamp too new");
  const text = typeof body === "string" ? body : body.toString("utf8");
  const content = Buffer.from(`${id}.${timestamp}.${text}`);
  const valid = signatures
    .split(" ")
    .filter((entry) => entry.startsWith("v1a,"))
    .some((entry) => verify(null, content, key, Buffer.from(entry.slice("v1a,".length), "base64")));
  if (!valid) throw new WebhookVerificationError("No matching signature found");
  return JSON.parse(text) as WebhookPayload;
}

/** `whpk_` + base64 of the key's 32 raw bytes, as the subscription's `public_key` gives it. */
function decodePublicKey(publicKey: string): KeyObject {
  const raw = Buffer.from(publicKey.slice(PUBLIC_KEY_PREFIX.length), "base64");
  if (raw.length !== 32) throw new Error("An ed25519 public key (whpk_…) holds 32 bytes in base64");
  return createPublicKey({ key: Buffer.concat([SPKI_ED25519_HEADER, raw]), format: "der", type: "spki" });
}
