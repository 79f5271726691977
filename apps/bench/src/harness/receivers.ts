import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { onCleanup } from "./cleanup.ts";

export interface CountingReceiverOptions {
  /** The status it answers with, after `delayMs`; "hang" reads the request and holds it until the sender gives up. */
  status?: number | "hang";
  delayMs?: number;
  /**
   * Listen on every address of 127.0.0.0/8, so that http://127.x.y.z:<port> are as many origins on
   * one server: it binds the wildcard address and drops any connection that is not to loopback.
   */
  everyLoopbackAddress?: boolean;
}

/**
 * A loopback endpoint that counts what it gets, for the phases that watch timing and concurrency at
 * an endpoint (it checks no signature). Each listens on its own port, so each is its own origin.
 */
export class CountingReceiver {
  port = 0;
  requests = 0;
  /** Distinct paths requested, and requests for a path already seen. */
  paths = new Set<string>();
  duplicates = 0;
  /** One entry per answered request, in order of answer. */
  answered: { arrivedAt: number; answeredAt: number }[] = [];
  /** The most requests in progress at once, and the most connections open at once. */
  peakOpenRequests = 0;
  peakOpenConnections = 0;
  close: () => Promise<void> = async () => {};
  #openRequests = 0;
  #openConnections = 0;

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start({ status = 200, delayMs = 0, everyLoopbackAddress = false }: CountingReceiverOptions): Promise<this> {
    const server = createServer((req, res) => {
      const arrivedAt = performance.now();
      this.requests++;
      if (this.paths.has(req.url ?? "")) this.duplicates++;
      this.paths.add(req.url ?? "");
      this.peakOpenRequests = Math.max(this.peakOpenRequests, ++this.#openRequests);
      res.once("close", () => this.#openRequests--);
      req.resume();
      if (status === "hang") return;
      req.once("end", () =>
        setTimeout(() => {
          this.answered.push({ arrivedAt, answeredAt: performance.now() });
          res.writeHead(status, { "content-type": "text/plain" }).end("ok");
        }, delayMs),
      );
    });
    server.keepAliveTimeout = 60_000;
    server.on("connection", (socket) => {
      if (!socket.localAddress?.replace(/^::ffff:/, "").startsWith("127.")) return void socket.destroy();
      this.peakOpenConnections = Math.max(this.peakOpenConnections, ++this.#openConnections);
      socket.once("close", () => this.#openConnections--);
    });
    await new Promise<void>((resolve) => server.listen(0, everyLoopbackAddress ? "0.0.0.0" : "127.0.0.1", resolve));
    this.port = (server.address() as AddressInfo).port;
    this.close = onCleanup(`close the receiver on port ${this.port}`, async () => {
      server.closeAllConnections(); // also the requests held open, so that nothing keeps the process alive
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
    return this;
  }
}

export const startCountingReceiver = (options: CountingReceiverOptions = {}) => new CountingReceiver().start(options);
