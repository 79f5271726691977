import { decodeSigningSecret, type SecretBox } from "@webhooks/core";

const LIMIT = 10_000;

/**
 * Decrypted signing keys by secret id. A secret row never changes (a new secret is a new row),
 * so a cached key cannot go stale; the cache only saves an AES-GCM decryption per attempt.
 */
export class SecretKeys {
  readonly #keys = new Map<string, Buffer>();

  constructor(private readonly box: SecretBox) {}

  get(secretId: string, ciphertext: Uint8Array): Buffer {
    let key = this.#keys.get(secretId);
    if (!key) {
      if (this.#keys.size >= LIMIT) this.#keys.clear();
      key = decodeSigningSecret(this.box.open(ciphertext));
      this.#keys.set(secretId, key);
    }
    return key;
  }
}
