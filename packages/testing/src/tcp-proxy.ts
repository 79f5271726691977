import { createServer, connect, type Server, type Socket } from "node:net";

/**
 * A TCP proxy on a free loopback port to a server, for tests that take a server away from one
 * client without stopping it for everyone: `refuse()` drops every connection through it and
 * stops listening (new connections are refused, as by a server that is down), `accept()` listens
 * on the same port again.
 */
export interface TcpProxy {
  port: number;
  refuse(): Promise<void>;
  accept(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {});
    }
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    client.pipe(upstream).pipe(client);
  });
  const listen = (port: number) => new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  await listen(0);
  const port = (server.address() as { port: number }).port;
  const refuse = async () => {
    if (!server.listening) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of sockets) socket.destroy();
    await closed;
  };
  return {
    port,
    refuse,
    accept: () => (server.listening ? Promise.resolve() : listen(port)),
    close: refuse,
  };
}
