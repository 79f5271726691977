import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { sql, testEnv } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { apiTest } from "./fixtures.ts";

// `npm run keys -- create --tenant T` (docs/api.md#tenant-scoped-api-keys), run as the docs say,
// and the key it prints used on the API: it sees only its tenant.
const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

const test = apiTest();

/** `npm <args>` on the test database, stdout a pipe, without the npm_* variables of the npm running the suite. */
function npm(args: string[], databaseUrl: string): Promise<{ code: number; stdout: string; stderr: string }> {
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

describe("npm run keys -- create --tenant", () => {
  test("creates a key scoped to the tenant, which list shows and the API enforces", async ({ api, database }) => {
    const created = await npm(
      ["run", "--silent", "keys", "--", "create", "--name", "acme-support", "--tenant", "acme"],
      database.url,
    );
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(/^whk_[A-Za-z0-9_-]{43}\n$/);
    expect(created.stderr).toMatch(/Created key_[0-9A-Z]{26} \(acme-support, scoped to tenant acme\)\./);
    const key = created.stdout.trim();

    const listed = await npm(["run", "--silent", "keys", "--", "list"], database.url);
    expect(listed.stdout).toMatch(
      /key_[0-9A-Z]{26} {2}whk_\S+ {2}acme-support {2}created \S+ {2}active {2}tenant acme\n/,
    );
    const [row] = await sql<{ tenant_id: string }>(
      database.url,
      "SELECT tenant_id FROM api_keys WHERE name = 'acme-support'",
    );
    expect(row!.tenant_id).toBe("acme");

    const theirs = await api.call("POST", "/v1/subscriptions", {
      json: { url: "https://example.com/a", events: ["x"], tenant_id: "acme" },
    });
    const other = await api.call("POST", "/v1/subscriptions", {
      json: { url: "https://example.com/b", events: ["x"], tenant_id: "globex" },
    });
    const seen = await api.call("GET", "/v1/subscriptions", { key });
    expect(seen.status).toBe(200);
    expect(seen.body.data.map((s: { id: string }) => s.id)).toEqual([theirs.body.id]);
    expect((await api.call("GET", `/v1/subscriptions/${other.body.id}`, { key })).status).toBe(404);
    await api.post("/v1/events", { type: "x", data: {} }, 403, { key });
  });

  test("lists keys without --tenant as unscoped", async ({ api, database }) => {
    const created = await npm(["run", "--silent", "keys", "--", "create", "--name", "server-side"], database.url);
    expect(created.code).toBe(0);
    const listed = await npm(["run", "--silent", "keys", "--", "list"], database.url);
    expect(listed.stdout).toMatch(/ {2}server-side {2}created \S+ {2}active {2}unscoped\n/);
  });

  test("refuses a malformed tenant id before creating anything", async ({ api, database }) => {
    const refused = await npm(
      ["run", "--silent", "keys", "--", "create", "--name", "bad", "--tenant", "has space"],
      database.url,
    );
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe("");
    expect(refused.stderr).toContain('--tenant must be 1 to 255 characters of A-Z a-z 0-9 _ - . : (got "has space")');
    const misplaced = await npm(["run", "--silent", "keys", "--", "list", "--tenant", "acme"], database.url);
    expect(misplaced.code).toBe(1);
    expect(misplaced.stderr).toContain("--tenant applies to create only");
    expect(await sql(database.url, "SELECT id FROM api_keys WHERE name = 'bad'")).toEqual([]);
  });
});
