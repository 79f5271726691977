import { timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { decodeSigningSecret, signWebhook } from "@webhooks/core";
import { onCleanup } from "./cleanup.ts";

export interface VerifiedWebhook {
  path: string;
  webhookId: string;
  body: string;
  /** performance.now() when the whole body had arrived. */
  receivedAt: number;
}

/** Standard Webhooks allows this much clock difference between sender and receiver. */
const TIMESTAMP_TOLERANCE_S = 5 * 60;

/**
 * A loopback receiver that verifies every signature (Standard Webhooks, contract §9) by signing
 * the message again with core's signing (node:crypto): the official `standardwebhooks` package,
 * which @webhooks/testing's receiver uses, hashes in JavaScript, which at thousands of requests
 * per second would make the receiver, not the service, the bottleneck. The product's tests check
 * core's signatures with the official package, so agreeing with core here is agreeing with it. Each
 * subscription points at its own path, so the receiver knows which secret to check with and can
 * tell a duplicate (same path and webhook-id twice) from the same event sent to another
 * subscription.
 */
export class Receiver {
  url = "";
  close: () => Promise<void> = async () => {};
  verified = 0;
  invalid = 0;
  duplicates = 0;
  onVerified: ((webhook: VerifiedWebhook) => void) | undefined;

  readonly #keys = new Map<string, Buffer>();
  readonly #seen = new Set<string>();
  readonly #waiters: { count: number; resolve: (at: number) => void }[] = [];
  readonly #server = createServer((req, res) => this.#handle(req, res));

  async start(): Promise<this> {
    // Keep-alive well past the worker's idle gaps, as a real receiver behind a load balancer would.
    this.#server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => this.#server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    this.close = onCleanup("close the receiver", () => this.#close());
    return this;
  }

  /** Webhooks to `${url}${path}` must be signed with `secret` (`whsec_` + base64). */
  expect(path: string, secret: string): void {
    this.#keys.set(path, decodeSigningSecret(secret));
  }

  /** Forgets counts and seen ids (not the secrets), between runs. */
  reset(): void {
    this.verified = 0;
    this.invalid = 0;
    this.duplicates = 0;
    this.#seen.clear();
    this.#waiters.length = 0;
  }

  /** Resolves with performance.now() at the moment the `count`th verified webhook arrives. */
  whenVerified(count: number): Promise<number> {
    if (this.verified >= count) return Promise.resolve(performance.now());
    return new Promise((resolve) => this.#waiters.push({ count, resolve }));
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const receivedAt = performance.now();
      const body = Buffer.concat(chunks).toString("utf8");
      const path = req.url ?? "/";
      const webhookId = header(req, "webhook-id");
      if (!this.#verify(path, webhookId, header(req, "webhook-timestamp"), header(req, "webhook-signature"), body)) {
        this.invalid++;
        res.writeHead(400).end("invalid signature");
        return;
      }
      const key = `${path} ${webhookId}`;
      if (this.#seen.has(key)) this.duplicates++;
      else this.#seen.add(key);
      this.verified++;
      this.onVerified?.({ path, webhookId, body, receivedAt });
      for (let i = this.#waiters.length - 1; i >= 0; i--) {
        const waiter = this.#waiters[i]!;
        if (this.verified >= waiter.count) {
          this.#waiters.splice(i, 1);
          waiter.resolve(receivedAt);
        }
      }
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
    });
  }

  #verify(path: string, id: string, timestamp: string, signatures: string, body: string): boolean {
    const key = this.#keys.get(path);
    if (!key || !id || !/^\d+$/.test(timestamp)) return false;
    if (Math.abs(Date.now() / 1000 - Number(timestamp)) > TIMESTAMP_TOLERANCE_S) return false;
    const signed = signWebhook({ secretKeys: [key], messageId: id, timestamp: new Date(Number(timestamp) * 1000), body });
    const expected = Buffer.from(signed["webhook-signature"]);
    // The header may carry several space-separated signatures (`v1,<base64>`); one valid one is enough.
    return signatures.split(" ").some((entry) => {
      const given = Buffer.from(entry);
      return given.length === expected.length && timingSafeEqual(given, expected);
    });
  }

  #close(): Promise<void> {
    return new Promise((resolve) => {
      this.#server.closeAllConnections();
      this.#server.close(() => resolve());
    });
  }
}

function header(req: IncomingMessage, name: string): string {
  const value = req.headers[name];
  return Array.isArray(value) ? (value[0] ?? "") : (value ?? "");
}
