import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";

/**
 * Signing secrets are stored encrypted with AES-256-GCM under SECRET_ENCRYPTION_KEY, so a copy of
 * the database alone does not let anyone forge webhooks. Stored form: version byte, 12-byte IV,
 * 16-byte auth tag, ciphertext. The version byte leaves room to rotate the key later.
 */
const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class SecretBox {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error("the secret encryption key must be 32 bytes");
    this.#key = key;
  }

  seal(plaintext: string): Buffer {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.#key, iv);
    const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    return Buffer.concat([Buffer.from([VERSION]), iv, cipher.getAuthTag(), body]);
  }

  open(sealed: Uint8Array): string {
    const bytes = Buffer.from(sealed);
    if (bytes.length < 1 + IV_BYTES + TAG_BYTES) throw new Error("sealed secret is too short");
    if (bytes[0] !== VERSION) throw new Error("unknown sealed secret version");
    const iv = bytes.subarray(1, 1 + IV_BYTES);
    const tag = bytes.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
    // Without authTagLength Node would accept a tag cut down to 4 bytes.
    const decipher = createDecipheriv("aes-256-gcm", this.#key, iv, { authTagLength: TAG_BYTES });
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(bytes.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]).toString(
      "utf8",
    );
  }
}
