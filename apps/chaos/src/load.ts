import { randomUUID } from "node:crypto";
import { errors, Pool } from "undici";
import { API_KEY, EVENT_TYPE } from "./stack.ts";

/** How the API answered one publish: 202, a 503 in the error shape, another status, or no answer. */
export type AnswerKind = "202" | "503 json" | "408 json" | "other status" | "refused" | "dropped" | "timed out";
export const ANSWER_KINDS: AnswerKind[] = [
  "202",
  "503 json",
  "408 json",
  "other status",
  "refused",
  "dropped",
  "timed out",
];

/** A client gives up on an event it could not publish in this long (not once in a run that passes). */
const GIVE_UP_AFTER_MS = 300_000;

/**
 * A steady open-loop load of publishes, as a client that follows docs/api.md#idempotency
 * does: every event has an Idempotency-Key, and a publish that is not answered 202 (a 503, a
 * dropped connection, a refused one) is sent again with the same key until it is. The answers are
 * counted by kind under the name of the moment they came in (`phase`).
 */
export class Load {
  phase = "before";
  readonly answers = new Map<string, Map<AnswerKind, number>>();
  /**
   * Accepted events: id, and when the first request to publish it was sent. Not when the 202 came:
   * a retry answered after a fault may return an event an earlier try created before it.
   */
  readonly accepted = new Map<string, number>();
  givenUp = 0;
  /** Other statuses seen, for the report: `503 text/html`, `500`, … */
  readonly oddAnswers = new Map<string, number>();
  readonly #pool: Pool;
  readonly #inFlight = new Set<Promise<void>>();
  #timer: NodeJS.Timeout | undefined;
  #sequence = 0;

  constructor(baseUrl: string) {
    this.#pool = new Pool(baseUrl, {
      connections: 64,
      pipelining: 1,
      connectTimeout: 5_000,
      headersTimeout: 20_000,
      bodyTimeout: 20_000,
    });
  }

  /** Publishes `perSecond` events a second until stop(). */
  start(perSecond: number): void {
    let due = 0;
    let last = performance.now();
    this.#timer = setInterval(() => {
      const now = performance.now();
      due += ((now - last) * perSecond) / 1000;
      last = now;
      for (; due >= 1; due--) {
        const publish = this.#publish().finally(() => this.#inFlight.delete(publish));
        this.#inFlight.add(publish);
      }
    }, 20);
  }

  /** Stops publishing new events, and waits until each one begun is accepted or given up. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    while (this.#inFlight.size > 0) await Promise.all(this.#inFlight);
  }

  close(): Promise<void> {
    return this.#pool.destroy();
  }

  #count(kind: AnswerKind): void {
    const counts = this.answers.get(this.phase) ?? new Map<AnswerKind, number>();
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
    this.answers.set(this.phase, counts);
  }

  async #publish(): Promise<void> {
    const key = randomUUID();
    const body = JSON.stringify({ type: EVENT_TYPE, data: { sequence: ++this.#sequence } });
    const headers = { authorization: `Bearer ${API_KEY}`, "content-type": "application/json", "idempotency-key": key };
    const [started, firstSentAt] = [performance.now(), Date.now()];
    // Backing off, as a client should: a restart of the API must not meet a storm of retries.
    for (let retry = 0; performance.now() - started < GIVE_UP_AFTER_MS; retry++) {
      let waitMs = Math.min(5_000, 500 * 2 ** retry);
      try {
        const response = await this.#pool.request({ method: "POST", path: "/v1/events", headers, body });
        const text = await response.body.text();
        if (response.statusCode === 202) {
          this.#count("202");
          this.accepted.set((JSON.parse(text) as { id: string }).id, firstSentAt);
          return;
        }
        const contentType = String(response.headers["content-type"] ?? "");
        if (response.statusCode === 503 && contentType.startsWith("application/json") && text.includes('"error"')) {
          this.#count("503 json");
          waitMs = Math.min(5, Number(response.headers["retry-after"] ?? 1)) * 1000;
        } else if (response.statusCode === 408 && text.includes('"error"')) {
          // This client was too slow to send its request (a busy machine): the server said so.
          this.#count("408 json");
        } else {
          this.#count("other status");
          const odd = `${response.statusCode} ${contentType} ${text.slice(0, 120)}`;
          this.oddAnswers.set(odd, (this.oddAnswers.get(odd) ?? 0) + 1);
        }
      } catch (error) {
        this.#count(answerKindOf(error));
      }
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
    this.givenUp++;
  }
}

/** A request that got no answer: refused (nothing listening), timed out, or dropped mid-way. */
function answerKindOf(error: unknown): AnswerKind {
  const code = (error as { code?: string }).code ?? "";
  if (code === "ECONNREFUSED") return "refused";
  if (
    error instanceof errors.HeadersTimeoutError ||
    error instanceof errors.BodyTimeoutError ||
    error instanceof errors.ConnectTimeoutError
  )
    return "timed out";
  return "dropped";
}
