import { Pool } from "undici";
import { onCleanup } from "./cleanup.ts";
import { BENCH_API_KEY } from "./config.ts";

/**
 * The bench's HTTP client for the API: one keep-alive pool, so that connection set-up is not part
 * of what is measured; `connections` bounds the requests in flight (undici queues the rest).
 */
export class ApiClient {
  readonly #pool: Pool;
  readonly #headers = { authorization: `Bearer ${BENCH_API_KEY}`, "content-type": "application/json" };
  // destroy, not close: close() would wait for requests still queued (after a timeout, say).
  readonly close = onCleanup("close an API client", async () => this.#pool.destroy());

  constructor(baseUrl: string, connections: number) {
    this.#pool = new Pool(baseUrl, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
  }

  /** The answer's status and body; with `expected`, an answer of another status throws, saying what it was. */
  async request<T>(method: "GET" | "POST", path: string, json?: unknown, expected?: number) {
    const body = json === undefined ? undefined : JSON.stringify(json);
    const response = await this.#pool.request({ method, path, headers: this.#headers, body });
    const [status, text] = [response.statusCode, await response.body.text()];
    if (expected !== undefined && status !== expected) throw new Error(`${method} ${path} answered ${status}: ${text}`);
    return { status, body: (text ? JSON.parse(text) : undefined) as T };
  }

  async createSubscription(url: string, events: string[], settings = {}): Promise<{ id: string; secret: string }> {
    const body = { url, events, ...settings };
    return (await this.request<{ id: string; secret: string }>("POST", "/v1/subscriptions", body, 201)).body;
  }

  /** Publishes an event; resolves with the HTTP status (202 when accepted), or 0 if the request failed. */
  async publish(type: string, data: Record<string, unknown>, expected?: 202): Promise<number> {
    const body = JSON.stringify({ type, data });
    const response = await this.#pool
      .request({ method: "POST", path: "/v1/events", headers: this.#headers, body })
      .catch(() => undefined);
    await response?.body.dump();
    const status = response?.statusCode ?? 0;
    if (expected !== undefined && status !== expected) throw new Error(`POST /v1/events answered ${status}`);
    return status;
  }
}
