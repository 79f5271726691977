import { createServer, type Server } from "node:net";
import { createTestDatabase, runFailingService, type TestDatabase, testEnv, withClient } from "@webhooks/testing";
import { afterAll, beforeAll, describe, expect, test } from "vitest";

/** A start-up failure is one line on stderr that names the setting to change, and exit code 1. */
let database: TestDatabase;
let holder: Server;
let heldPort: number;

beforeAll(async () => {
  database = await createTestDatabase();
  holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
  heldPort = (holder.address() as { port: number }).port;
});
afterAll(async () => {
  await new Promise<void>((resolve) => holder.close(() => resolve()));
  await database.drop();
});

function expectOneLine(stderr: string): string {
  const lines = stderr.trim().split("\n");
  expect(lines, stderr).toHaveLength(1);
  expect(stderr).not.toMatch(/\n\s+at /);
  return lines[0]!;
}

describe("the API's start-up failures", () => {
  test("a PORT in use is one line naming PORT", async () => {
    const result = await runFailingService("api", testEnv(database.url, { PORT: String(heldPort) }));
    expect(result.code).toBe(1);
    const line = expectOneLine(result.stderr);
    expect(line).toContain(`127.0.0.1:${heldPort}`);
    expect(line).toContain("EADDRINUSE");
    expect(line).toContain("set PORT to a free port");
  });

  test("a HOST that is not an address of this machine is one line naming HOST", async () => {
    // 192.0.2.1 is TEST-NET-1 (RFC 5737): never assigned to a machine, so binding to it fails.
    const result = await runFailingService("api", testEnv(database.url, { HOST: "192.0.2.1" }));
    expect(result.code).toBe(1);
    const line = expectOneLine(result.stderr);
    expect(line).toContain("EADDRNOTAVAIL");
    expect(line).toContain("Set HOST");
  });

  test("a database the role may not create is one line saying what to do", async () => {
    // A role without CREATEDB, for a database that does not exist yet.
    const role = `webhooks_nocreate_${database.name.slice(-12)}`;
    await withClient(database.url, (client) => client.query(`CREATE ROLE ${role} LOGIN NOCREATEDB`));
    try {
      const url = new URL(database.url);
      url.username = role;
      url.pathname = `/${database.name}_missing`;
      const result = await runFailingService("api", testEnv(url.toString()));
      expect(result.code).toBe(1);
      const line = expectOneLine(result.stderr);
      expect(line).toMatch(
        /^The API could not start: database \S+_missing does not exist, and the role in DATABASE_URL cannot create it/,
      );
      expect(line).toContain("grant the role CREATEDB");
    } finally {
      await withClient(database.url, (client) => client.query(`DROP ROLE ${role}`));
    }
  });
});
