import { createServer } from "node:http";
import type { Registry } from "prom-client";

export interface OpsServer {
  /** The port it listens on (useful when asked for port 0). */
  port: number;
  close(): Promise<void>;
}

/** The worker's operational endpoints, on WORKER_METRICS_PORT: `/metrics` and `/healthz`. */
export async function startOpsServer(registry: Registry, host: string, port: number): Promise<OpsServer> {
  const server = createServer((req, res) => {
    if (req.url === "/metrics") {
      registry
        .metrics()
        .then((text) => res.writeHead(200, { "content-type": registry.contentType }).end(text))
        .catch(() => res.writeHead(500).end());
    } else if (req.url === "/healthz") {
      res.writeHead(200, { "content-type": "application/json" }).end('{"status":"ok"}');
    } else {
      res.writeHead(404, { "content-type": "application/json" }).end('{"error":{"type":"invalid_request_error","code":"resource_missing","message":"Not found"}}');
    }
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  const address = server.address();
  return {
    port: typeof address === "object" && address ? address.port : 0,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
