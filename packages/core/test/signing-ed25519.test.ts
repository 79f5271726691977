import { createPublicKey, verify } from "node:crypto";
import * as noble from "@noble/ed25519";
import { describe, expect, it } from "vitest";
import {
  decodePublicKey,
  decodeSigningKey,
  decodeSigningSecret,
  generateSigningKeyPair,
  generateSigningSecret,
  publicKeyOf,
  signWebhook,
} from "../src/signing.ts";

/**
 * ed25519 (`v1a`) signatures, checked with @noble/ed25519: an implementation written apart from
 * OpenSSL, which node:crypto (and so the signer) uses.
 */
const content = (headers: { "webhook-id": string; "webhook-timestamp": string }, body: string) =>
  new TextEncoder().encode(`${headers["webhook-id"]}.${headers["webhook-timestamp"]}.${body}`);
const rawPublicKey = (publicKey: string) => Buffer.from(publicKey.slice("whpk_".length), "base64");

describe("ed25519 key pairs", () => {
  it("are whsk_ and whpk_, each the base64 of 32 bytes, and the public key derives from the private one", () => {
    const { privateKey, publicKey } = generateSigningKeyPair();
    expect(privateKey).toMatch(/^whsk_[A-Za-z0-9+/]{43}=$/);
    expect(publicKey).toMatch(/^whpk_[A-Za-z0-9+/]{43}=$/);
    expect(publicKeyOf(privateKey)).toBe(publicKey);
    expect(generateSigningKeyPair().publicKey).not.toBe(publicKey);
  });

  it("match @noble/ed25519's public key for the same seed", async () => {
    const { privateKey, publicKey } = generateSigningKeyPair();
    const seed = Buffer.from(privateKey.slice("whsk_".length), "base64");
    expect(Buffer.from(await noble.getPublicKeyAsync(seed)).equals(rawPublicKey(publicKey))).toBe(true);
  });

  it("decode a whpk_ public key for node:crypto, and refuse a malformed one", () => {
    const { publicKey } = generateSigningKeyPair();
    expect(decodePublicKey(publicKey).asymmetricKeyType).toBe("ed25519");
    expect(() => decodePublicKey("whsec_abc")).toThrow(/whpk_/);
    expect(() => decodePublicKey("whpk_AAAA")).toThrow(/32 bytes/);
  });
});

describe("signWebhook with an ed25519 key", () => {
  const body = JSON.stringify({ type: "invoice.paid", data: { amount: 4200, name: "Zoë 🎉" } });

  it("signs v1a,<base64 of 64 bytes>, verified by @noble/ed25519 and by node:crypto", async () => {
    const { privateKey, publicKey } = generateSigningKeyPair();
    const headers = signWebhook({
      secretKeys: [decodeSigningKey(privateKey)],
      messageId: "evt_1",
      timestamp: new Date(),
      body,
    });
    const [scheme, signature] = headers["webhook-signature"].split(",");
    expect(scheme).toBe("v1a");
    const bytes = Buffer.from(signature!, "base64");
    expect(bytes).toHaveLength(64);
    expect(await noble.verifyAsync(bytes, content(headers, body), rawPublicKey(publicKey))).toBe(true);
    expect(verify(null, content(headers, body), decodePublicKey(publicKey), bytes)).toBe(true);
  });

  it("fails verification when the body, the timestamp or the key is another", async () => {
    const { privateKey, publicKey } = generateSigningKeyPair();
    const headers = signWebhook({
      secretKeys: [decodeSigningKey(privateKey)],
      messageId: "evt_2",
      timestamp: new Date(),
      body,
    });
    const bytes = Buffer.from(headers["webhook-signature"].slice("v1a,".length), "base64");
    const check = (message: Uint8Array, key: string) => noble.verifyAsync(bytes, message, rawPublicKey(key));
    expect(await check(content(headers, body.replace("4200", "4201")), publicKey)).toBe(false);
    const later = { ...headers, "webhook-timestamp": String(Number(headers["webhook-timestamp"]) + 1) };
    expect(await check(content(later, body), publicKey)).toBe(false);
    expect(await check(content(headers, body), generateSigningKeyPair().publicKey)).toBe(false);
  });

  it("signs with both keys of a rotation, the current one first, each verifying with its own public key", async () => {
    const current = generateSigningKeyPair();
    const previous = generateSigningKeyPair();
    const headers = signWebhook({
      secretKeys: [decodeSigningKey(current.privateKey), decodeSigningKey(previous.privateKey)],
      messageId: "evt_3",
      timestamp: new Date(),
      body,
    });
    const signatures = headers["webhook-signature"].split(" ");
    expect(signatures).toHaveLength(2);
    const [first, second] = signatures.map((entry) => Buffer.from(entry.slice("v1a,".length), "base64"));
    expect(await noble.verifyAsync(first!, content(headers, body), rawPublicKey(current.publicKey))).toBe(true);
    expect(await noble.verifyAsync(second!, content(headers, body), rawPublicKey(previous.publicKey))).toBe(true);
    expect(await noble.verifyAsync(first!, content(headers, body), rawPublicKey(previous.publicKey))).toBe(false);
  });

  it("keeps HMAC secrets as they were: decodeSigningKey of a whsec_ is its bytes", () => {
    const secret = generateSigningSecret();
    const key = decodeSigningKey(secret);
    expect(Buffer.isBuffer(key) && key.equals(decodeSigningSecret(secret))).toBe(true);
    expect(createPublicKey(decodeSigningKey(generateSigningKeyPair().privateKey)).asymmetricKeyType).toBe("ed25519");
  });
});
