import {
  createServer,
  type IncomingMessage,
  maxHeaderSize,
  type RequestListener,
  type Server,
  type ServerResponse,
  STATUS_CODES,
} from "node:http";
import type { Duplex } from "node:stream";
import { newId } from "./ids.ts";
import type { Logger } from "./logger.ts";
import { SERVER_TIMEOUTS, serverTimeoutOptions } from "./server-timeouts.ts";

/** A server's socket as Node's HTTP server sees it: `_httpMessage` is the response being written on it. */
type Socket = Duplex & { _httpMessage?: ServerResponse | null };

type RefusalStatus = 400 | 408 | 417 | 431;

/**
 * An HTTP server for `listener` with core's SERVER_TIMEOUTS, for the API and the worker's ops
 * server alike. Whatever the listener never sees, because Node's parser refuses it or because
 * its head is one HTTP/1.1 forbids, is answered in the API's error shape (docs/api.md#errors),
 * with a request id, and the connection is closed.
 */
export function createHttpServer(listener: RequestListener, logger: Logger): Server {
  const recent = new WeakMap<Duplex, RecentBytes>();
  const server = createServer(
    {
      ...serverTimeoutOptions,
      // Node answers an HTTP/1.1 request without Host with an empty 400 of its own; the head
      // check below refuses it instead, in the error shape.
      requireHostHeader: false,
    },
    (request, response) => {
      const problem = headProblem(request, recent.get(request.socket));
      if (problem === undefined) {
        listener(request, response);
        return;
      }
      const { requestId, body } = refusal(logger, 400, "malformed head", problem);
      response.writeHead(400, refusalHeaders(requestId, body));
      response.end(body);
    },
  );
  server.on("connection", (socket: Duplex) => {
    const bytes = new RecentBytes(2 * maxHeaderSize);
    recent.set(socket, bytes);
    // Ahead of Node's parser, so the window holds the head of the request it is about to emit.
    socket.prependListener("data", (chunk: Buffer) => bytes.add(chunk));
  });
  answerUnreadableRequests(server, logger);
  return server;
}

/**
 * The last bytes a connection sent: at least `keep` of them, and always the whole last chunk, so
 * that the head of the request being parsed (at most Node's header size limit) lies within them.
 * Node parses a connection's requests in order, so each request line comes after the one before:
 * `takeLine` looks only past the last line it found. An earlier request's line, still in the
 * window, cannot then vouch for a later one, and a busy keep-alive connection's earlier requests
 * are not searched again for every request.
 */
class RecentBytes {
  private chunks: Buffer[] = [];
  private size = 0;
  /** Where the first chunk begins in the connection's bytes. */
  private start = 0;
  /** Where the last request line found ends in the connection's bytes. */
  private searched = 0;
  constructor(private readonly keep: number) {}

  add(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.chunks.length > 1 && this.size - (this.chunks[0]?.length ?? 0) >= this.keep) {
      const dropped = this.chunks.shift()?.length ?? 0;
      this.size -= dropped;
      this.start += dropped;
    }
  }

  /** Whether `line` lies after the last line found; if so, it is the last line found. */
  takeLine(line: string): boolean {
    let [first, offset] = [0, this.start];
    while (first < this.chunks.length - 1 && offset + (this.chunks[first]?.length ?? 0) <= this.searched) {
      offset += this.chunks[first++]?.length ?? 0;
    }
    const rest = first === this.chunks.length - 1 ? this.chunks[first] : Buffer.concat(this.chunks.slice(first));
    const needle = Buffer.from(line, "latin1");
    const at = rest?.indexOf(needle, Math.max(0, this.searched - offset)) ?? -1;
    if (at === -1) return false;
    this.searched = offset + at + needle.length;
    return true;
  }
}

/**
 * Why a head Node's parser let through must still be refused (RFC 9112 §3, §3.2), or undefined:
 * a version other than HTTP/1.0 or 1.1; no Host in HTTP/1.1, more than one, or one that is not a
 * host; a request line that is not `method SP target SP version` with single spaces (Node's
 * parser skips extra spaces, which a proxy in front may read otherwise).
 */
function headProblem(request: IncomingMessage, recent: RecentBytes | undefined): string | undefined {
  const version = request.httpVersion;
  if (version !== "1.1" && version !== "1.0") return `HTTP/${version} is not supported: send HTTP/1.1`;
  const hosts: string[] = [];
  for (let i = 0; i < request.rawHeaders.length; i += 2) {
    if (request.rawHeaders[i]?.toLowerCase() === "host") hosts.push(request.rawHeaders[i + 1] ?? "");
  }
  if (hosts.length > 1) return "The request has more than one Host header";
  const host = hosts[0];
  if (host === undefined && version === "1.1") return "The request has no Host header";
  if (host !== undefined && !/^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]+)(?::\d{0,5})?$/.test(host))
    return "The request's Host header is not a host";
  if (recent && !recent.takeLine(`${request.method} ${request.url} HTTP/${version}\r\n`))
    return "The request line is malformed: send method, target and version separated by single spaces";
  return undefined;
}

/** A refusal's log line, and its answer's request id and JSON body. */
function refusal(logger: Logger, status: RefusalStatus, reason: string, message: string) {
  const requestId = newId("request");
  logger.info({ requestId, status, reason }, "request refused before routing");
  const body = JSON.stringify({
    error: { type: "invalid_request_error", code: "invalid_request", message, request_id: requestId },
  });
  return { requestId, body };
}

function refusalHeaders(requestId: string, body: string) {
  return {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    "request-id": requestId,
    connection: "close",
  };
}

/**
 * Requests that Node's HTTP parser refuses never reach the listener: a malformed request line or
 * header, a head over the size limit, a body that stops arriving, an unknown Expect, CONNECT.
 * Node would answer them with an empty 400 (431, 408, 417), or, for CONNECT, close the
 * connection. They get the error shape and a request id instead, and the connection is closed:
 * after a parse error nothing more can be read from it.
 *
 * The bytes the parser refuses may follow a request it read whole and that is still being
 * handled (a publish followed by stray bytes, or by the last byte of a body whose Content-Length
 * was one short). That request's answer goes out first: the refusal waits for it, lest the client
 * read a 400 for a request that took effect.
 */
function answerUnreadableRequests(server: Server, logger: Logger): void {
  const refuse = (socket: Duplex, status: 400 | 408 | 431, reason: string, message: string) => {
    const { requestId, body } = refusal(logger, status, reason, message);
    const headers = Object.entries(refusalHeaders(requestId, body))
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join("");
    // Closed for good once written, as Node does: a half-open socket would stay open for as long
    // as the client kept it so, beyond the reach of the server's timeouts.
    socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${headers}\r\n${body}`, () => socket.destroy());
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
      logger,
      417,
      "Expect",
      `Expect: ${request.headers.expect} is not supported; only 100-continue is`,
    );
    response.writeHead(417, refusalHeaders(requestId, body));
    response.end(body);
  });
}
