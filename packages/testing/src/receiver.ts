import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";

export interface ReceivedWebhook {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  json: { type: string; timestamp: string; data: Record<string, unknown> };
  receivedAt: number;
  /** Whether the signature verified with the official standardwebhooks package, given a secret. */
  signatureValid: boolean | undefined;
}

export interface Reply {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  /** Answer after this long. */
  delayMs?: number;
}

export interface TestReceiver {
  url: string;
  received: ReceivedWebhook[];
  /** Requests being handled right now, by webhook-id: more than 1 means a concurrent duplicate. */
  maxConcurrentPerId: number;
  /** Requests being answered right now, and the most there ever were at once. */
  concurrent: number;
  maxConcurrent: number;
  /** Secrets to verify with, keyed by nothing: any one that verifies counts. */
  secrets: string[];
  reply: (webhook: ReceivedWebhook, index: number) => Reply;
  countsById(): Map<string, number>;
  close(): Promise<void>;
}

/**
 * A real HTTP receiver on loopback (STYLE 12). It records every webhook, verifies signatures with
 * the official `standardwebhooks` package, tracks concurrency per webhook-id, and answers as the
 * test says.
 */
export async function startReceiver(reply: TestReceiver["reply"] = () => ({ status: 200 })): Promise<TestReceiver> {
  const inFlight = new Map<string, number>();
  const state: TestReceiver = {
    url: "",
    received: [],
    maxConcurrentPerId: 0,
    concurrent: 0,
    maxConcurrent: 0,
    secrets: [],
    reply,
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

  const server = createServer((req, res) => {
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
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const id = String(req.headers["webhook-id"] ?? "");
      const current = (inFlight.get(id) ?? 0) + 1;
      inFlight.set(id, current);
      state.maxConcurrentPerId = Math.max(state.maxConcurrentPerId, current);

      let signatureValid: boolean | undefined;
      if (state.secrets.length > 0) {
        signatureValid = state.secrets.some((secret) => {
          try {
            new Webhook(secret).verify(body, {
              "webhook-id": id,
              "webhook-timestamp": String(req.headers["webhook-timestamp"] ?? ""),
              "webhook-signature": String(req.headers["webhook-signature"] ?? ""),
            });
            return true;
          } catch {
            return false;
          }
        });
      }
      let json: ReceivedWebhook["json"];
      try {
        json = JSON.parse(body);
      } catch {
        json = { type: "", timestamp: "", data: {} };
      }
      const webhook: ReceivedWebhook = { path: req.url ?? "/", headers: req.headers, body, json, receivedAt: Date.now(), signatureValid };
      const index = state.received.push(webhook) - 1;
      const answer = state.reply(webhook, index);
      const finish = () => {
        inFlight.set(id, (inFlight.get(id) ?? 1) - 1);
        if (!res.destroyed) res.writeHead(answer.status ?? 200, answer.headers ?? {}).end(answer.body ?? "ok");
      };
      if (answer.delayMs) setTimeout(finish, answer.delayMs);
      else finish();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}
