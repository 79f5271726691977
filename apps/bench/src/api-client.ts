import { Pool } from "undici";
import { onCleanup } from "./cleanup.ts";
import { BENCH_API_KEY } from "./settings.ts";

export interface ApiReply<T> {
  status: number;
  body: T;
}

/**
 * The benchmark's HTTP client for the API: one undici Pool with keep-alive, so that connection
 * set-up is not part of what is measured, and `connections` bounds how many requests are in
 * flight at once (undici queues the rest).
 */
export class ApiClient {
  readonly #pool: Pool;
  readonly close: () => Promise<void>;
  readonly #headers = { authorization: `Bearer ${BENCH_API_KEY}`, "content-type": "application/json" };

  constructor(baseUrl: string, connections: number) {
    this.#pool = new Pool(baseUrl, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
    // destroy, not close: close() would wait for requests still queued (e.g. after a timeout).
    this.close = onCleanup("close the API client", () => this.#pool.destroy());
  }

  async request<T>(method: "GET" | "POST", path: string, json?: unknown): Promise<ApiReply<T>> {
    const response = await this.#pool.request({
      method,
      path,
      headers: this.#headers,
      ...(json === undefined ? {} : { body: JSON.stringify(json) }),
    });
    const text = await response.body.text();
    return { status: response.statusCode, body: (text ? JSON.parse(text) : undefined) as T };
  }

  /** `settings`: further fields of the subscription, such as max_in_flight. */
  async createSubscription(
    url: string,
    events: string[],
    settings: Record<string, unknown> = {},
  ): Promise<{ id: string; secret: string }> {
    const reply = await this.request<{ id: string; secret: string }>("POST", "/v1/subscriptions", {
      url,
      events,
      ...settings,
    });
    if (reply.status !== 201)
      throw new Error(`POST /v1/subscriptions answered ${reply.status}: ${JSON.stringify(reply.body)}`);
    return reply.body;
  }

  /** Publishes an event; returns the HTTP status (202 when accepted). */
  async publish(type: string, data: Record<string, unknown>): Promise<number> {
    const response = await this.#pool.request({
      method: "POST",
      path: "/v1/events",
      headers: this.#headers,
      body: JSON.stringify({ type, data }),
    });
    await response.body.dump();
    return response.statusCode;
  }
}
