import {
  createHmac,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  KeyObject,
  randomBytes,
  sign,
} from "node:crypto";

/**
 * Standard Webhooks signing (docs/api.md#signature-schemes). Two schemes:
 *
 * - `hmac-sha256`: the secret is `whsec_` + base64 of 32 random bytes; the signature
 *   (`v1,<base64>`) is HMAC-SHA256 over `{id}.{timestamp}.{body}` keyed with the decoded bytes.
 * - `ed25519`: the service keeps the private key (`whsk_` + base64 of its 32-byte seed, never
 *   shown) and hands out the public key (`whpk_` + base64 of its 32 raw bytes); the signature
 *   (`v1a,<base64>`) is the ed25519 signature of the same `{id}.{timestamp}.{body}`.
 *
 * Written with node:crypto rather than the `standardwebhooks` package because this runs once per
 * attempt on the hot path and that package hashes in JavaScript (and has no `v1a`); tests verify
 * every signature with independent implementations.
 */
const SECRET_PREFIX = "whsec_";
const PRIVATE_KEY_PREFIX = "whsk_";
const PUBLIC_KEY_PREFIX = "whpk_";

export const signatureSchemes = ["hmac-sha256", "ed25519"] as const;
export type SignatureScheme = (typeof signatureSchemes)[number];

/** A decoded key: the HMAC key's bytes, or an ed25519 private key. */
export type SigningKey = Buffer | KeyObject;

// The DER headers of an ed25519 key in PKCS #8 (private) and SPKI (public) form (RFC 8410): the
// raw key bytes follow them, so raw keys are wrapped and unwrapped without an ASN.1 library.
const PKCS8_ED25519_HEADER = Buffer.from("302e020100300506032b657004220420", "hex");
const SPKI_ED25519_HEADER = Buffer.from("302a300506032b6570032100", "hex");

export function generateSigningSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString("base64");
}

/** A new ed25519 key pair: the private key to store sealed, the public key to show. */
export function generateSigningKeyPair(): { privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const seed = privateKey.export({ format: "der", type: "pkcs8" }).subarray(PKCS8_ED25519_HEADER.length);
  return { privateKey: PRIVATE_KEY_PREFIX + seed.toString("base64"), publicKey: encodePublicKey(publicKey) };
}

/** `whpk_` + base64 of the raw 32 bytes of an ed25519 public key. */
export function encodePublicKey(publicKey: KeyObject): string {
  const der = publicKey.export({ format: "der", type: "spki" });
  return PUBLIC_KEY_PREFIX + der.subarray(SPKI_ED25519_HEADER.length).toString("base64");
}

/** The public key of a stored `whsk_` private key, as shown to a subscription's owner. */
export function publicKeyOf(privateKey: string): string {
  return encodePublicKey(createPublicKey(decodePrivateKey(privateKey)));
}

/** A `whpk_` public key as a KeyObject (for verifying, as a receiver does). */
export function decodePublicKey(publicKey: string): KeyObject {
  if (!publicKey.startsWith(PUBLIC_KEY_PREFIX)) throw new Error("an ed25519 public key starts with whpk_");
  const raw = Buffer.from(publicKey.slice(PUBLIC_KEY_PREFIX.length), "base64");
  if (raw.length !== 32) throw new Error("an ed25519 public key is 32 bytes");
  return createPublicKey({ key: Buffer.concat([SPKI_ED25519_HEADER, raw]), format: "der", type: "spki" });
}

function decodePrivateKey(privateKey: string): KeyObject {
  const seed = Buffer.from(privateKey.slice(PRIVATE_KEY_PREFIX.length), "base64");
  if (seed.length !== 32) throw new Error("an ed25519 private key is a 32-byte seed");
  return createPrivateKey({ key: Buffer.concat([PKCS8_ED25519_HEADER, seed]), format: "der", type: "pkcs8" });
}

export function decodeSigningSecret(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, "base64");
}

/** A stored key as the signer takes it: `whsk_` is an ed25519 private key, anything else an HMAC secret. */
export function decodeSigningKey(stored: string): SigningKey {
  return stored.startsWith(PRIVATE_KEY_PREFIX) ? decodePrivateKey(stored) : decodeSigningSecret(stored);
}

export interface SignedHeaders {
  "webhook-id": string;
  "webhook-timestamp": string;
  "webhook-signature": string;
}

/**
 * Signs with each key, the current one first: during a rotation's overlap (docs/api.md#rotate-the-signing-secret)
 * the header carries both signatures, space-separated, and a receiver accepts the message if any
 * of them verifies with the key it has. An HMAC key signs `v1`, an ed25519 key `v1a`.
 */
export function signWebhook(input: {
  secretKeys: readonly SigningKey[];
  messageId: string;
  timestamp: Date;
  body: string;
}): SignedHeaders {
  if (input.secretKeys.length === 0) throw new Error("signWebhook needs at least one key");
  const seconds = Math.floor(input.timestamp.getTime() / 1000).toString();
  const content = `${input.messageId}.${seconds}.${input.body}`;
  const signatures = input.secretKeys.map((key) =>
    key instanceof KeyObject
      ? `v1a,${sign(null, Buffer.from(content), key).toString("base64")}`
      : `v1,${createHmac("sha256", key).update(content).digest("base64")}`,
  );
  return {
    "webhook-id": input.messageId,
    "webhook-timestamp": seconds,
    "webhook-signature": signatures.join(" "),
  };
}
