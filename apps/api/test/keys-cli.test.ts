import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { ADMIN_DATABASE_URL, databaseUrl, sql, testEnv } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { apiTest } from "./fixtures.ts";

// `npm run keys` exactly as docs/operations.md#api-keys tells a newcomer to run it, from the
// repository root.
const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

// The database alone: the CLI is the only thing here that uses it.
const test = apiTest();

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `npm <args>` with the test database; stdout is a pipe, as in `KEY=$(...)`. */
function npm(args: string[], databaseUrl: string): Promise<Run> {
  // Without the npm_* variables of the npm that may be running this suite: npm reads its
  // configuration (--silent among it) from them.
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith("npm_")),
  );
  const env = { ...inherited, ...testEnv(databaseUrl), LOG_LEVEL: "silent" };
  return new Promise((resolve) => {
    execFile("npm", args, { cwd: ROOT, env }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe("npm run keys", () => {
  test("prints its usage for --help and exits 0; without a command it exits 1", async ({ database }) => {
    const help = await npm(["run", "keys", "--", "--help"], database.url);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage:");
    expect(help.stdout).toContain("npm run keys -- create --name <name>");

    const bare = await npm(["run", "--silent", "keys"], database.url);
    expect(bare.code).toBe(1);
    expect(bare.stderr).toContain("Usage:");
  });

  test("prints the key alone on stdout, and everything else, the database included, on stderr", async ({
    database,
  }) => {
    const created = await npm(["run", "--silent", "keys", "--", "create", "--name", "stdout-only"], database.url);
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/^whk_[A-Za-z0-9_-]{43}\n$/);
    expect(created.stderr).toContain(`Database: ${database.url} (DATABASE_URL)`);
    expect(created.stderr).toMatch(
      /Created key_[0-9A-Z]{26} \(stdout-only\)\. The key is on standard output; it is never shown again\./,
    );
    expect(created.stderr).not.toContain(created.stdout.trim());
  });

  test("refuses to create a key whose captured output would hold npm's banner too", async ({ database }) => {
    const noisy = await npm(["run", "keys", "--", "create", "--name", "captured-with-banner"], database.url);
    expect(noisy.code).toBe(1);
    expect(noisy.stdout).toContain("> keys");
    expect(noisy.stderr).toContain("npm run --silent keys -- create");
    const listed = await npm(["run", "--silent", "keys", "--", "list"], database.url);
    expect(listed.stdout).not.toContain("captured-with-banner");
  });

  test("says so when DATABASE_URL names a database that did not exist, and creates and migrates it", async ({
    database,
  }) => {
    const name = `webhooks_test_keys_${randomBytes(5).toString("hex")}`;
    try {
      const created = await npm(["run", "--silent", "keys", "--", "list"], databaseUrl(name));
      expect(created.code).toBe(0);
      expect(created.stderr).toContain(`It did not exist: created database ${name}.`);
      expect(created.stderr).toContain("set DATABASE_URL");
      expect(created.stdout).toBe("No stored keys.\n");

      const again = await npm(["run", "--silent", "keys", "--", "list"], databaseUrl(name));
      expect(again.stderr).not.toContain("did not exist");
    } finally {
      await sql(ADMIN_DATABASE_URL, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    }
  });

  test("says a key was already revoked, changing nothing, and fails for an unknown key", async ({ database }) => {
    await npm(["run", "--silent", "keys", "--", "create", "--name", "revoke-twice"], database.url);
    const listed = await npm(["run", "--silent", "keys", "--", "list"], database.url);
    const id = /(key_[0-9A-Z]{26}) {2}whk_\S+ {2}revoke-twice/.exec(listed.stdout)?.[1];
    expect(id).toBeDefined();

    const first = await npm(["run", "--silent", "keys", "--", "revoke", id!], database.url);
    expect(first.code).toBe(0);
    expect(first.stdout).toBe(`Revoked ${id} (revoke-twice)\n`);
    const [before] = await sql<{ revoked_at: Date }>(database.url, `SELECT revoked_at FROM api_keys WHERE id = $1`, [
      id,
    ]);
    const revokedAt = before!.revoked_at;

    const second = await npm(["run", "--silent", "keys", "--", "revoke", id!], database.url);
    expect(second.code).toBe(0);
    expect(second.stdout).toBe(
      `${id} (revoke-twice) was already revoked at ${revokedAt.toISOString()}; nothing changed\n`,
    );
    const [after] = await sql<{ revoked_at: Date }>(database.url, `SELECT revoked_at FROM api_keys WHERE id = $1`, [
      id,
    ]);
    expect(after!.revoked_at).toEqual(revokedAt);

    const unknown = await npm(
      ["run", "--silent", "keys", "--", "revoke", "key_01JD5V6Y7Z8X9W0V1U2T3S4R5Q"],
      database.url,
    );
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("No such API key");
  });
});
