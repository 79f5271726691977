import { createServer, type Server } from "node:http";
import { getRequestListener, RequestError } from "@hono/node-server";
import { newId, type Logger } from "@webhooks/core";
import { ApiError, errorBody } from "./api-error.ts";

/**
 * Timeouts of the HTTP server. Node's defaults hold a connection that trickles its headers for a
 * minute (and check only every 30 s), so a few hundred slow clients (slowloris) can tie the
 * server up; these close such connections within about 11 s.
 */
export const SERVER_TIMEOUTS = {
  /** The whole request head must arrive within this. */
  headersTimeoutMs: 10_000,
  /** The whole request, body included (at most BODY_LIMIT_BYTES), must arrive within this. */
  requestTimeoutMs: 30_000,
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: 5_000,
  /** How often Node looks for connections past headersTimeoutMs or requestTimeoutMs. */
  connectionsCheckingIntervalMs: 1_000,
} as const;

type FetchHandler = Parameters<typeof getRequestListener>[0];

/**
 * The API's HTTP server: the app behind @hono/node-server's request listener, with the timeouts
 * above. Requests that the adapter refuses before the app sees them (a backslash in the path, a
 * missing or invalid Host, `OPTIONS *`) are answered in the contract's error shape, with a
 * request id, instead of the adapter's empty 400.
 */
export function createApiServer(fetch: FetchHandler, logger: Logger): Server {
  const listener = getRequestListener(fetch, {
    errorHandler: (error) => {
      const requestId = newId("request");
      const refused = error instanceof RequestError;
      const apiError = refused
        ? new ApiError(400, "invalid_request_error", "invalid_request", `The request could not be read: ${error.message}`)
        : new ApiError(500, "api_error", "internal_error", "An unexpected error occurred. Quote the request id when reporting it.");
      if (refused) logger.info({ requestId, reason: error.message }, "request refused before routing");
      else logger.error({ requestId, err: error }, "unhandled error");
      return new Response(JSON.stringify(errorBody(apiError, requestId)), {
        status: apiError.status,
        headers: { "content-type": "application/json", "request-id": requestId },
      });
    },
  });
  return createServer(
    {
      headersTimeout: SERVER_TIMEOUTS.headersTimeoutMs,
      requestTimeout: SERVER_TIMEOUTS.requestTimeoutMs,
      keepAliveTimeout: SERVER_TIMEOUTS.keepAliveTimeoutMs,
      connectionsCheckingInterval: SERVER_TIMEOUTS.connectionsCheckingIntervalMs,
      // Node answers an HTTP/1.1 request without Host with an empty 400 of its own; let the
      // adapter refuse it instead, so that the answer is in the contract's shape.
      requireHostHeader: false,
    },
    listener,
  );
}
