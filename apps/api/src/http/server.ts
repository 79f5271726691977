import type { Server } from "node:http";
import { getRequestListener, RequestError } from "@hono/node-server";
import { createHttpServer, type Logger, newId } from "@webhooks/core";
import { ApiError, errorBody } from "./api-error.ts";

type FetchHandler = Parameters<typeof getRequestListener>[0];

/**
 * The API's HTTP server: the app behind @hono/node-server's request listener, in core's
 * createHttpServer (its timeouts, and its answers to what Node's parser refuses). Requests that
 * the adapter refuses before the app sees them (a backslash in the path, an invalid Host,
 * `OPTIONS *`) are answered in the API's error shape, with a request id, instead of the
 * adapter's empty 400.
 */
export function createApiServer(fetch: FetchHandler, logger: Logger): Server {
  const listener = getRequestListener(fetch, {
    errorHandler: (error) => {
      const requestId = newId("request");
      const refused = error instanceof RequestError;
      const apiError = refused
        ? new ApiError(
            400,
            "invalid_request_error",
            "invalid_request",
            `The request could not be read: ${error.message}`,
          )
        : new ApiError(
            500,
            "api_error",
            "internal_error",
            "An unexpected error occurred. Quote the request id when reporting it.",
          );
      if (refused) logger.info({ requestId, reason: error.message }, "request refused before routing");
      else logger.error({ requestId, err: error }, "unhandled error");
      return new Response(JSON.stringify(errorBody(apiError, requestId)), {
        status: apiError.status,
        headers: { "content-type": "application/json", "request-id": requestId },
      });
    },
  });
  return createHttpServer(listener, logger);
}
