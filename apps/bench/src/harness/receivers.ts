import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { onCleanup } from "./cleanup.ts";

/**
 * `status` after `delayMs` ("hang": held until the sender gives up); `everyLoopbackAddress` binds
 * the wildcard address, dropping connections not to 127.0.0.0/8: each 127.x.y.z is an origin.
 */
export type CountingReceiverOptions = { status?: number | "hang"; delayMs?: number; everyLoopbackAddress?: boolean };

/**
 * A loopback endpoint that counts what it gets, for the phases that watch timing and concurrency at
 * an endpoint (it checks no signature). Each listens on its own port, so each is its own origin.
 */
export class CountingReceiver {
  port = 0;
  requests = 0;
  paths = new Set<string>(); // distinct paths requested; `duplicates` repeat one
  duplicates = 0;
  answered: { arrivedAt: number; answeredAt: number }[] = []; // in order of answer
  peakOpenRequests = 0; // the most at once
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
