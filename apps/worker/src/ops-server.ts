import type { Server, ServerResponse } from "node:http";
import { createHttpServer, type Logger, listen, newId } from "@webhooks/core";
import type { Registry } from "prom-client";

export interface OpsServer {
  /** The port it listens on (useful when asked for port 0). */
  port: number;
  close(): Promise<void>;
}

const ALLOWED_METHODS = "GET, HEAD";

/**
 * Answers in the API's error shape (docs/api.md#errors), as the API does: every response carries a
 * `request-id`, and an error repeats it in its body.
 */
function sendError(
  res: ServerResponse,
  requestId: string,
  status: 404 | 405 | 500,
  code: string,
  message: string,
  headers: Record<string, string> = {},
) {
  const type = status === 500 ? "api_error" : "invalid_request_error";
  const body = JSON.stringify({ error: { type, code, message, request_id: requestId } });
  res.writeHead(status, { "content-type": "application/json", "request-id": requestId, ...headers }).end(body);
}

/**
 * The worker's operational endpoints: `/metrics` and `/healthz`, for GET and HEAD. A query string
 * is ignored (scrapers may add one), the rest is matched on the path. It is the API's kind of
 * server (core's createHttpServer): the same timeouts, so slow clients cannot tie it up, and the
 * same answers, in the error shape, to requests it cannot read.
 */
export function createOpsServer(registry: Registry, logger: Logger): Server {
  return createHttpServer((req, res) => {
    const requestId = newId("request");
    const path = (req.url ?? "").split("?")[0];
    if (path !== "/metrics" && path !== "/healthz") {
      sendError(res, requestId, 404, "resource_missing", `Unrecognized request URL: ${req.method} ${path}`);
    } else if (req.method !== "GET" && req.method !== "HEAD") {
      sendError(
        res,
        requestId,
        405,
        "method_not_allowed",
        `${req.method} is not allowed on ${path}; use ${ALLOWED_METHODS}`,
        { allow: ALLOWED_METHODS },
      );
    } else if (path === "/healthz") {
      res.writeHead(200, { "content-type": "application/json", "request-id": requestId }).end('{"status":"ok"}');
    } else {
      registry
        .metrics()
        .then((text) => res.writeHead(200, { "content-type": registry.contentType, "request-id": requestId }).end(text))
        .catch((error: unknown) => {
          logger.error({ err: error, requestId }, "could not read the metrics");
          sendError(
            res,
            requestId,
            500,
            "internal_error",
            "An unexpected error occurred. Quote the request id when reporting it.",
          );
        });
    }
  }, logger);
}

/** The ops server on WORKER_METRICS_PORT; a port it cannot have is a StartupError naming that variable. */
export async function startOpsServer(
  registry: Registry,
  host: string,
  port: number,
  logger: Logger,
): Promise<OpsServer> {
  const server = createOpsServer(registry, logger);
  await listen(server, port, host, "WORKER_METRICS_PORT");
  const address = server.address();
  return {
    port: typeof address === "object" && address ? address.port : 0,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
