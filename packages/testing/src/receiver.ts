import { timingSafeEqual, verify as verifySignature } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import { decodePublicKey, decodeSigningSecret, signWebhook } from "@webhooks/core";
import { Webhook } from "standardwebhooks";

export interface ReceivedWebhook {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  json: { type: string; timestamp: string; data: Record<string, unknown> };
  receivedAt: number;
  /** Whether the signature verified (see ReceiverOptions.verifyWith), given a secret. */
  signatureValid: boolean | undefined;
  /** Over mutual TLS: the common name of the client certificate presented. */
  clientCertificateSubject: string | undefined;
}

/** What `onVerified` is told of each webhook whose signature verified. */
export interface VerifiedWebhook {
  path: string;
  webhookId: string;
  body: string;
  /** performance.now() when the whole body had arrived. */
  arrivedAt: number;
}

export interface Reply {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  /** Answer after this long. */
  delayMs?: number;
  /** Send the status line, headers and part of the body, then nothing more: a receiver that hangs mid-body. */
  stallBody?: boolean;
}

export interface ReceiverOptions {
  /**
   * "standardwebhooks" (the default): the official package, so that the product's tests check
   * core's signatures against it. "core": core's own signing (node:crypto); the official package
   * hashes in JavaScript, which at thousands of requests per second would make the receiver, not
   * the service, the bottleneck of a benchmark. Agreeing with core is agreeing with the package,
   * since the tests check that.
   */
  verifyWith?: "standardwebhooks" | "core";
  /**
   * Keep every webhook in `received`, track concurrency and answer with `reply` (the default).
   * With false it only counts (verified, invalid, duplicates) and answers 200, or 400 to a bad
   * signature: a benchmark sends millions, whose bodies it cannot keep.
   */
  record?: boolean;
  /** How long an idle connection stays open (Node's default otherwise). */
  keepAliveTimeoutMs?: number;
  /**
   * Serve HTTPS with this certificate (PEM); with `clientCa`, demand a client certificate issued
   * by that CA (mutual TLS): a connection without one fails its TLS handshake.
   */
  tls?: { certificate: string; privateKey: string; clientCa?: string };
  /** Answer 401, unverified and uncounted, to a request whose Authorization header this refuses. */
  authorize?: (authorization: string | undefined) => boolean;
}

export interface TestReceiver {
  url: string;
  received: ReceivedWebhook[];
  /** Requests being handled right now, by webhook-id: more than 1 means a concurrent duplicate. */
  maxConcurrentPerId: number;
  /** Requests being answered right now, and the most there ever were at once. */
  concurrent: number;
  maxConcurrent: number;
  /** Connections open right now, and the most there ever were at once. */
  connections: number;
  maxConnections: number;
  /**
   * Secrets (`whsec_`, for `v1` signatures) and ed25519 public keys (`whpk_`, for `v1a`) to verify
   * with, keyed by nothing: any one that verifies counts.
   */
  secrets: string[];
  reply: (webhook: ReceivedWebhook, index: number) => Reply;
  /** Webhooks checked against a secret: those that verified, those that did not, and verified repeats of a path and webhook-id. */
  verified: number;
  invalid: number;
  duplicates: number;
  onVerified: ((webhook: VerifiedWebhook) => void) | undefined;
  /** Webhooks to `${url}${path}` are verified with `secret` alone; once one path has its own, a path without one verifies with `secrets` or fails. */
  useSecret(path: string, secret: string): void;
  /** Resolves with performance.now() at the arrival of the `count`th verified webhook. */
  whenVerified(count: number): Promise<number>;
  /** Forgets the counts, the ids seen and the waiters (not the secrets, nor `received`), between runs. */
  resetCounts(): void;
  countsById(): Map<string, number>;
  close(): Promise<void>;
}

/** Standard Webhooks allows this much clock difference between sender and receiver. */
const TIMESTAMP_TOLERANCE_S = 5 * 60;

type Verify = (secrets: readonly string[], id: string, timestamp: string, signatures: string, body: string) => boolean;

/**
 * `v1a` (ed25519) signatures, which the standardwebhooks package does not know, verified with
 * node:crypto against the public key: any signature of the header that verifies counts.
 */
const verifyAsymmetric = (publicKey: string, id: string, timestamp: string, signatures: string, body: string) => {
  if (!id || !/^\d+$/.test(timestamp)) return false;
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > TIMESTAMP_TOLERANCE_S) return false;
  const key = decodePublicKey(publicKey);
  const content = Buffer.from(`${id}.${timestamp}.${body}`);
  return signatures
    .split(" ")
    .filter((entry) => entry.startsWith("v1a,"))
    .some((entry) => verifySignature(null, content, key, Buffer.from(entry.slice(4), "base64")));
};

const verifyWithPackage: Verify = (secrets, id, timestamp, signatures, body) =>
  secrets.some((secret) => {
    if (secret.startsWith("whpk_")) return verifyAsymmetric(secret, id, timestamp, signatures, body);
    try {
      new Webhook(secret).verify(body, {
        "webhook-id": id,
        "webhook-timestamp": timestamp,
        "webhook-signature": signatures,
      });
      return true;
    } catch {
      return false;
    }
  });

/** Signs the message again with core's signing and compares; decoded keys are kept, as the secrets are few. */
function coreVerifier(): Verify {
  const keys = new Map<string, Buffer>();
  return (secrets, id, timestamp, signatures, body) => {
    if (!id || !/^\d+$/.test(timestamp)) return false;
    if (Math.abs(Date.now() / 1000 - Number(timestamp)) > TIMESTAMP_TOLERANCE_S) return false;
    const given = signatures.split(" ").map((entry) => Buffer.from(entry));
    return secrets.some((secret) => {
      if (secret.startsWith("whpk_")) return verifyAsymmetric(secret, id, timestamp, signatures, body);
      let key = keys.get(secret);
      if (!key) {
        key = decodeSigningSecret(secret);
        keys.set(secret, key);
      }
      const signed = signWebhook({
        secretKeys: [key],
        messageId: id,
        timestamp: new Date(Number(timestamp) * 1000),
        body,
      });
      const expected = Buffer.from(signed["webhook-signature"]);
      // The header may carry several space-separated signatures (`v1,<base64>`); one valid one is enough.
      return given.some((entry) => entry.length === expected.length && timingSafeEqual(entry, expected));
    });
  };
}

function header(req: IncomingMessage, name: string): string {
  const value = req.headers[name];
  return Array.isArray(value) ? (value[0] ?? "") : (value ?? "");
}

/**
 * A real HTTP receiver on loopback. It verifies signatures, counts, records every
 * webhook, tracks concurrency per webhook-id, and answers as the test says; with
 * `{ record: false, verifyWith: "core" }` it only verifies and counts, for thousands of requests
 * per second (the bench).
 */
export async function startReceiver(
  reply: TestReceiver["reply"] = () => ({ status: 200 }),
  options: ReceiverOptions = {},
): Promise<TestReceiver> {
  const record = options.record ?? true;
  const verify = options.verifyWith === "core" ? coreVerifier() : verifyWithPackage;
  const inFlight = new Map<string, number>();
  const pathSecrets = new Map<string, string[]>();
  const seen = new Set<string>();
  const waiters: { count: number; resolve: (at: number) => void }[] = [];
  const state: TestReceiver = {
    url: "",
    received: [],
    maxConcurrentPerId: 0,
    concurrent: 0,
    maxConcurrent: 0,
    connections: 0,
    maxConnections: 0,
    secrets: [],
    reply,
    verified: 0,
    invalid: 0,
    duplicates: 0,
    onVerified: undefined,
    useSecret: (path, secret) => void pathSecrets.set(path, [secret]),
    whenVerified(count) {
      if (state.verified >= count) return Promise.resolve(performance.now());
      return new Promise((resolve) => waiters.push({ count, resolve }));
    },
    resetCounts() {
      state.verified = 0;
      state.invalid = 0;
      state.duplicates = 0;
      seen.clear();
      waiters.length = 0;
    },
    countsById() {
      const counts = new Map<string, number>();
      for (const webhook of state.received) {
        const id = String(webhook.headers["webhook-id"]);
        counts.set(id, (counts.get(id) ?? 0) + 1);
      }
      return counts;
    },
    close: async () => {},
  };

  /** Verifies and counts; undefined when the receiver has no secret to verify with. */
  const check = (
    path: string,
    id: string,
    req: IncomingMessage,
    body: string,
    arrivedAt: number,
  ): boolean | undefined => {
    const secrets =
      pathSecrets.get(path) ?? (state.secrets.length > 0 || pathSecrets.size > 0 ? state.secrets : undefined);
    if (!secrets) return undefined;
    if (!verify(secrets, id, header(req, "webhook-timestamp"), header(req, "webhook-signature"), body)) {
      state.invalid++;
      return false;
    }
    const key = `${path} ${id}`;
    if (seen.has(key)) state.duplicates++;
    else seen.add(key);
    state.verified++;
    state.onVerified?.({ path, webhookId: id, body, arrivedAt });
    for (let i = waiters.length - 1; i >= 0; i--) {
      const waiter = waiters[i]!;
      if (state.verified >= waiter.count) {
        waiters.splice(i, 1);
        waiter.resolve(arrivedAt);
      }
    }
    return true;
  };

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    if (record) {
      // Counted from the request's arrival to its answer (or its connection closing).
      state.concurrent += 1;
      state.maxConcurrent = Math.max(state.maxConcurrent, state.concurrent);
      let counted = true;
      const done = () => {
        if (counted) state.concurrent -= 1;
        counted = false;
      };
      res.once("finish", done);
      res.once("close", done);
    }
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      if (options.authorize?.(req.headers.authorization) === false) {
        res.writeHead(401, { "content-type": "text/plain" }).end("unauthorized");
        return;
      }
      const arrivedAt = performance.now();
      const body = Buffer.concat(chunks).toString("utf8");
      const path = req.url ?? "/";
      const id = header(req, "webhook-id");
      const signatureValid = check(path, id, req, body, arrivedAt);
      if (!record) {
        if (signatureValid === false) res.writeHead(400, { "content-type": "text/plain" }).end("invalid signature");
        else res.writeHead(200, { "content-type": "text/plain" }).end("ok");
        return;
      }

      const current = (inFlight.get(id) ?? 0) + 1;
      inFlight.set(id, current);
      state.maxConcurrentPerId = Math.max(state.maxConcurrentPerId, current);
      let json: ReceivedWebhook["json"];
      try {
        json = JSON.parse(body);
      } catch {
        json = { type: "", timestamp: "", data: {} };
      }
      const webhook: ReceivedWebhook = {
        path,
        headers: req.headers,
        body,
        json,
        receivedAt: Date.now(),
        signatureValid,
        clientCertificateSubject: options.tls?.clientCa
          ? String((req.socket as TLSSocket).getPeerCertificate().subject?.CN ?? "")
          : undefined,
      };
      const index = state.received.push(webhook) - 1;
      const answer = state.reply(webhook, index);
      const finish = () => {
        inFlight.set(id, (inFlight.get(id) ?? 1) - 1);
        if (res.destroyed) return;
        const status = answer.status ?? 200;
        if (answer.stallBody) {
          res.writeHead(status, { ...answer.headers, "content-length": "1024" }).write('{"partial":');
        } else {
          res.writeHead(status, answer.headers ?? {}).end(answer.body ?? "ok");
        }
      };
      if (answer.delayMs) setTimeout(finish, answer.delayMs);
      else finish();
    });
  };
  const tls = options.tls;
  const server = tls
    ? createHttpsServer(
        {
          cert: tls.certificate,
          key: tls.privateKey,
          ...(tls.clientCa ? { ca: tls.clientCa, requestCert: true, rejectUnauthorized: true } : {}),
        },
        handle,
      )
    : createServer(handle);
  server.on("connection", (socket) => {
    state.maxConnections = Math.max(state.maxConnections, ++state.connections);
    socket.once("close", () => state.connections--);
  });
  if (options.keepAliveTimeoutMs !== undefined) server.keepAliveTimeout = options.keepAliveTimeoutMs;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.url = `${tls ? "https" : "http"}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}
