import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { SecretBox } from "../src/secret-box.ts";
import { generateSigningSecret } from "../src/signing.ts";

const VERSION_BYTES = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = VERSION_BYTES + IV_BYTES + TAG_BYTES;

describe("SecretBox", () => {
  const box = new SecretBox(randomBytes(32));

  it.each([
    ["a signing secret", generateSigningSecret()],
    ["an empty string", ""],
    ["unicode", "clé secrète 🔑 密钥"],
    ["a long string", "x".repeat(10_000)],
  ])("opens what it sealed: %s", (_case, plaintext) => {
    expect(box.open(box.seal(plaintext))).toBe(plaintext);
  });

  it("stores a version byte, a 12-byte IV, a 16-byte tag and the ciphertext", () => {
    const plaintext = "clé 🔑";
    const sealed = box.seal(plaintext);
    expect(sealed[0]).toBe(1);
    expect(sealed).toHaveLength(HEADER_BYTES + Buffer.byteLength(plaintext, "utf8"));
  });

  it("does not store the plaintext", () => {
    const plaintext = generateSigningSecret();
    const sealed = box.seal(plaintext);
    expect(sealed.includes(Buffer.from(plaintext))).toBe(false);
    expect(sealed.includes(Buffer.from(plaintext.slice("whsec_".length), "base64"))).toBe(false);
  });

  it("opens a plain Uint8Array, as a database driver may return one", () => {
    const sealed = box.seal("bytes");
    expect(box.open(new Uint8Array(sealed))).toBe("bytes");
  });

  it("uses a fresh IV every time, so the same text seals differently", () => {
    const sealed = Array.from({ length: 100 }, () => box.seal("same text"));
    const ivs = sealed.map((bytes) => bytes.subarray(VERSION_BYTES, VERSION_BYTES + IV_BYTES).toString("hex"));
    expect(new Set(sealed.map((bytes) => bytes.toString("hex"))).size).toBe(100);
    expect(new Set(ivs).size).toBe(100);
    for (const bytes of sealed) expect(box.open(bytes)).toBe("same text");
  });

  it("refuses to open when any single byte after the version is flipped", () => {
    const sealed = box.seal("whsec_tamper-me");
    for (let index = VERSION_BYTES; index < sealed.length; index++) {
      const tampered = Buffer.from(sealed);
      tampered[index] = (tampered[index] ?? 0) ^ 0x01;
      expect(() => box.open(tampered), `byte ${index}`).toThrow();
    }
  });

  it("refuses an unknown version byte", () => {
    const sealed = box.seal("text");
    sealed[0] = 2;
    expect(() => box.open(sealed)).toThrow(/version/);
  });

  it("refuses to open with the wrong key", () => {
    const sealed = box.seal("whsec_secret");
    expect(() => new SecretBox(randomBytes(32)).open(sealed)).toThrow();
  });

  it("opens with another box holding the same key", () => {
    const key = randomBytes(32);
    expect(new SecretBox(Buffer.from(key)).open(new SecretBox(key).seal("shared"))).toBe("shared");
  });

  it.each([
    ["cut inside the ciphertext", (sealed: Buffer) => sealed.subarray(0, sealed.length - 1)],
    ["without ciphertext", (sealed: Buffer) => sealed.subarray(0, HEADER_BYTES)],
    ["cut inside the tag", (sealed: Buffer) => sealed.subarray(0, VERSION_BYTES + IV_BYTES + 3)],
    ["cut inside the IV", (sealed: Buffer) => sealed.subarray(0, 5)],
    ["only the version byte", (sealed: Buffer) => sealed.subarray(0, 1)],
    ["empty", () => Buffer.alloc(0)],
    ["with a byte appended", (sealed: Buffer) => Buffer.concat([sealed, Buffer.from([0])])],
  ])("refuses a sealed value %s", (_case, damage) => {
    expect(() => box.open(damage(box.seal("whsec_secret")))).toThrow();
  });

  it("refuses a sealed value whose authentication tag is cut short", () => {
    const sealed = box.seal("");
    expect(() => box.open(sealed.subarray(0, VERSION_BYTES + IV_BYTES + 4))).toThrow();
  });

  it.each([0, 16, 31, 33, 64])("refuses a key of %i bytes", (length) => {
    expect(() => new SecretBox(randomBytes(length))).toThrow(/32 bytes/);
  });
});
