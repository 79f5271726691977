import { decodeSigningKey, type SecretBox, type SigningKey } from "@webhooks/core";

const LIMIT = 10_000;

/**
 * Decrypted signing keys (an HMAC secret's bytes, or an ed25519 private key) by secret id. A secret row never changes (a new secret is a new row),
 * so a cached key cannot go stale; the cache saves an AES-GCM decryption (and an ed25519 key's
 * parsing) per attempt.
 */
export class SecretKeys {
  readonly #keys = new Map<string, SigningKey>();

  constructor(private readonly box: SecretBox) {}

  get(secretId: string, ciphertext: Uint8Array): SigningKey {
    let key = this.#keys.get(secretId);
    if (!key) {
      if (this.#keys.size >= LIMIT) this.#keys.clear();
      key = decodeSigningKey(this.box.open(ciphertext));
      this.#keys.set(secretId, key);
    }
    return key;
  }
}
