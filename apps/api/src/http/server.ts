import { createServer, type Server, type ServerResponse, STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import { getRequestListener, RequestError } from "@hono/node-server";
import { type Logger, newId, SERVER_TIMEOUTS, serverTimeoutOptions } from "@webhooks/core";
import { ApiError, errorBody } from "./api-error.ts";

type FetchHandler = Parameters<typeof getRequestListener>[0];

/** A server's socket as Node's HTTP server sees it: `_httpMessage` is the response being written on it. */
type Socket = Duplex & { _httpMessage?: ServerResponse | null };

/**
 * The API's HTTP server: the app behind @hono/node-server's request listener, with core's
 * SERVER_TIMEOUTS. Requests that the adapter refuses before the app sees them (a backslash in the path, a
 * missing or invalid Host, `OPTIONS *`) are answered in the API's error shape, with a
 * request id, instead of the adapter's empty 400.
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
  const server = createServer(
    {
      ...serverTimeoutOptions,
      // Node answers an HTTP/1.1 request without Host with an empty 400 of its own; let the
      // adapter refuse it instead, so that the answer is in the API's error shape.
      requireHostHeader: false,
    },
    listener,
  );
  answerUnreadableRequests(server, logger);
  return server;
}

/**
 * Requests that Node's HTTP parser refuses never reach the app: a malformed request line or
 * header, a head over the size limit, a body that stops arriving, an unknown Expect, CONNECT.
 * Node would answer them with an empty 400 (431, 408, 417), or, for CONNECT, close the
 * connection. They get the API's error shape and a request id instead, and the connection
 * is closed: after a parse error nothing more can be read from it.
 *
 * The bytes the parser refuses may follow a request it read whole and that is still being
 * handled (a publish followed by stray bytes, or by the last byte of a body whose Content-Length
 * was one short). That request's answer goes out first: the refusal waits for it, lest the client
 * read a 400 for a request that took effect.
 */
function answerUnreadableRequests(server: Server, logger: Logger): void {
  /** A refusal's log line, and its answer's request id and JSON body. */
  const refusal = (status: 400 | 408 | 417 | 431, reason: string, message: string) => {
    const requestId = newId("request");
    logger.info({ requestId, status, reason }, "request refused before routing");
    const apiError = new ApiError(status, "invalid_request_error", "invalid_request", message);
    return { requestId, body: JSON.stringify(errorBody(apiError, requestId)) };
  };
  const refuse = (socket: Duplex, status: 400 | 408 | 431, reason: string, message: string) => {
    const { requestId, body } = refusal(status, reason, message);
    // Closed for good once written, as Node does: a half-open socket would stay open for as long
    // as the client kept it so, beyond the reach of the server's timeouts.
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
        `request-id: ${requestId}\r\nconnection: close\r\n\r\n${body}`,
      () => socket.destroy(),
    );
  };
  const refuseUnreadable = (error: Error & { code?: string }, socket: Duplex) => {
    if (error.code === "HPE_HEADER_OVERFLOW") {
      refuse(socket, 431, error.code, "The request's headers are too large");
    } else if (error.code === "ERR_HTTP_REQUEST_TIMEOUT") {
      refuse(
        socket,
        408,
        error.code,
        `The request did not arrive in time (headers within ${SERVER_TIMEOUTS.headersTimeoutMs / 1000} s, all of it within ${SERVER_TIMEOUTS.requestTimeoutMs / 1000} s)`,
      );
    } else {
      refuse(socket, 400, error.code ?? "parse error", "The request could not be read: it is not well-formed HTTP/1.1");
    }
  };
  /** Sockets whose refusal waits for the answers to the requests read before it. */
  const refusing = new WeakSet<Duplex>();
  /**
   * Refuses once the response on `socket` (Node's `_httpMessage`, the one being written; the
   * answers to pipelined requests follow it in turn) is out, if its request was read whole. A
   * request whose body the error cut short cannot be answered: the refusal is its answer.
   */
  const refuseAfterAnswers = (error: Error & { code?: string }, socket: Socket) => {
    const answering = socket._httpMessage;
    if (answering?.req.complete && socket.writable) {
      refusing.add(socket);
      // Node's own 'finish' listener, added first, has by then moved on to the next response, or
      // is closing the connection (a response that said `connection: close`): then so be it.
      answering.once("finish", () => {
        if (socket.writable) refuseAfterAnswers(error, socket);
      });
    } else if (!socket.writable || answering?.headersSent) {
      // Gone, or its response has begun: nothing more can be said on this connection.
      socket.destroy();
    } else {
      refuseUnreadable(error, socket);
    }
  };

  server.on("clientError", (error: Error & { code?: string }, socket: Socket) => {
    // The parser goes on failing on whatever else arrives: the refusal is already planned.
    if (refusing.has(socket)) return;
    if (error.code === "ECONNRESET") socket.destroy();
    else refuseAfterAnswers(error, socket);
  });
  server.on("connect", (_request, socket: Duplex) =>
    refuse(socket, 400, "CONNECT", "CONNECT is not supported: this server is not a proxy"),
  );
  server.on("checkExpectation", (request, response) => {
    const { requestId, body } = refusal(
      417,
      "Expect",
      `Expect: ${request.headers.expect} is not supported; only 100-continue is`,
    );
    response.writeHead(417, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
      "request-id": requestId,
      connection: "close",
    });
    response.end(body);
  });
}
