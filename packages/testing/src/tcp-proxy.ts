import { connect, createServer, type Server, type Socket } from "node:net";

/**
 * A TCP proxy on a free loopback port to a server, for tests that take a server away from one
 * client without stopping it for everyone: `refuse()` drops every connection through it and
 * stops listening (new connections are refused, as by a server that is down), `accept()` listens
 * on the same port again. `blackhole()` makes every connection open now go silent for good:
 * nothing more is passed either way and nothing is closed, as on a network path that died
 * without a reset (a host gone, a failover to a new address); new connections go through.
 */
export interface TcpProxy {
  port: number;
  blackhole(): void;
  refuse(): Promise<void>;
  accept(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  // Each connection through the proxy: the client's socket and the one to the server.
  const connections = new Set<[Socket, Socket]>();
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    const connection: [Socket, Socket] = [client, upstream];
    connections.add(connection);
    for (const socket of connection) socket.on("error", () => {});
    client.on("close", () => {
      connections.delete(connection);
      upstream.destroy();
    });
    upstream.on("close", () => client.destroy());
    client.pipe(upstream).pipe(client);
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
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
    for (const connection of connections) for (const socket of connection) socket.destroy();
    await closed;
  };
  return {
    port,
    blackhole() {
      for (const [client, upstream] of connections) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        // Read and drop what comes, so that neither side sees its writes back up.
        for (const socket of [client, upstream]) {
          socket.removeAllListeners("data");
          socket.on("data", () => {});
          socket.resume();
        }
      }
    },
    refuse,
    accept: () => (server.listening ? Promise.resolve() : listen(port)),
    close: refuse,
  };
}
