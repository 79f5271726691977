import { createServer, request as httpRequest, type IncomingMessage, type Server } from "node:http";
import { connect, type Socket } from "node:net";

/**
 * A forward HTTP proxy on loopback, as an egress proxy (squid, tinyproxy) would be: `CONNECT
 * host:port` opens a tunnel, and a request in absolute form (`POST http://host:port/path`) is
 * forwarded. It records what it was asked for, so a test sees which address the sender named;
 * `route` picks where each target really goes (a test maps a public address to a loopback
 * receiver, so nothing leaves the machine). `requireAuth` demands Proxy-Authorization (407
 * otherwise); `refuse` answers every request with that status instead of forwarding it.
 */
export interface ProxyRequest {
  method: "CONNECT" | string;
  /** `host:port` for CONNECT; the absolute URL otherwise. */
  target: string;
  /** The Host header the client sent (absolute form), which the proxy passes on. */
  host: string | undefined;
  proxyAuthorization: string | undefined;
}

export interface TestEgressProxy {
  url: string;
  port: number;
  requests: ProxyRequest[];
  /** Where a target goes; the default is the target itself. */
  route: (host: string, port: number) => { host: string; port: number };
  /** `user:password` that Proxy-Authorization must carry, or undefined for none. */
  requireAuth: string | undefined;
  /** Answer every request with this status (403, 502...) instead of forwarding it; undefined to forward. */
  refuse: number | undefined;
  close(): Promise<void>;
}

/** `host:port` with an IPv6 host in brackets, as CONNECT writes it. */
function splitHostPort(text: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(text);
  return { host: match?.[1] ?? match?.[2] ?? text, port: Number(match?.[3] ?? 0) };
}

export async function startEgressProxy(): Promise<TestEgressProxy> {
  const sockets = new Set<Socket>();
  const state: TestEgressProxy = {
    url: "",
    port: 0,
    requests: [],
    route: (host, port) => ({ host, port }),
    requireAuth: undefined,
    refuse: undefined,
    close: async () => {},
  };

  /** The status to refuse with, or undefined to go ahead. */
  const verdict = (req: IncomingMessage): number | undefined => {
    const authorization = req.headers["proxy-authorization"];
    state.requests.push({
      method: req.method ?? "",
      target: req.url ?? "",
      host: req.headers.host,
      proxyAuthorization: authorization,
    });
    if (state.requireAuth !== undefined) {
      const expected = `Basic ${Buffer.from(state.requireAuth).toString("base64")}`;
      if (authorization !== expected) return 407;
    }
    return state.refuse;
  };

  const server: Server = createServer((req, res) => {
    const refused = verdict(req);
    if (refused !== undefined) {
      res.writeHead(refused, refused === 407 ? { "proxy-authenticate": 'Basic realm="test"' } : {}).end();
      return;
    }
    let target: URL;
    try {
      target = new URL(req.url ?? "");
    } catch {
      res.writeHead(400).end("absolute-form request expected");
      return;
    }
    const { host, port } = state.route(target.hostname.replace(/^\[|\]$/g, ""), Number(target.port) || 80);
    const headers = { ...req.headers };
    delete headers["proxy-authorization"];
    delete headers["proxy-connection"];
    const upstream = httpRequest(
      { host, port, method: req.method, path: `${target.pathname}${target.search}`, headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", () => {
      if (!res.headersSent) res.writeHead(502).end("proxy could not reach the target");
      else res.destroy();
    });
    req.pipe(upstream);
  });

  server.on("connect", (req: IncomingMessage, client: Socket, head: Buffer) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => {});
    const refused = verdict(req);
    if (refused !== undefined) {
      client.end(
        `HTTP/1.1 ${refused} Refused\r\n${refused === 407 ? 'Proxy-Authenticate: Basic realm="test"\r\n' : ""}\r\n`,
      );
      return;
    }
    const requested = splitHostPort(req.url ?? "");
    const { host, port } = state.route(requested.host, requested.port);
    const upstream = connect(port, host, () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client).pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on("close", () => {
      sockets.delete(upstream);
      client.destroy();
    });
    upstream.on("error", () => {
      if (!client.destroyed) client.end("HTTP/1.1 502 Bad Gateway\r\n\r\n");
    });
    client.on("close", () => upstream.destroy());
  });
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.port = (server.address() as { port: number }).port;
  state.url = `http://127.0.0.1:${state.port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    });
  return state;
}
