import { type AddressInfo, createServer, type Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { checkRedis } from "../src/reachability.ts";

/** A loopback port that nothing listens on: taken from the system, then given back. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("checkRedis", () => {
  it("names the cause when nothing listens, not ioredis's bare 'Connection is closed.'", async () => {
    const port = await closedPort();
    const message = await checkRedis(`redis://127.0.0.1:${port}`);
    expect(message).toContain(
      `Cannot reach Redis at redis://127.0.0.1:${port} (connect ECONNREFUSED 127.0.0.1:${port})`,
    );
    expect(message).not.toContain("Connection is closed");
  });

  it("names the cause when something other than Redis answers", async () => {
    const sockets = new Set<Socket>();
    const server = createServer((socket) => {
      sockets.add(socket);
      socket.on("data", () => socket.write("HTTP/1.1 400 Bad Request\r\n\r\n"));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const message = await checkRedis(`redis://127.0.0.1:${(server.address() as AddressInfo).port}`);
      expect(message).toMatch(/^Cannot reach Redis at .* \(Unknown RESP type .+\)\. Start it/);
      expect(message).not.toContain("Connection is closed");
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it("is undefined when Redis answers", async () => {
    expect(await checkRedis(process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379")).toBeUndefined();
  });
});
