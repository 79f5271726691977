import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { applyMigrations, MIGRATIONS_DIR } from "@webhooks/db";
import { ADMIN_DATABASE_URL, databaseUrl, sql } from "@webhooks/testing";
import { afterEach, describe, expect, it } from "vitest";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const quiet = { info: () => {}, warn: () => {} };
const created: string[] = [];

function freshName(): string {
  const name = `webhooks_migrate_${randomBytes(5).toString("hex")}`;
  created.push(name);
  return name;
}

afterEach(async () => {
  for (const name of created.splice(0)) await sql(ADMIN_DATABASE_URL, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
});

describe("applyMigrations", () => {
  it("creates a missing database and records every migration the way Prisma does", async () => {
    const url = databaseUrl(freshName());
    const result = await applyMigrations(url, quiet);
    const names = (await readdir(MIGRATIONS_DIR, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name).sort();
    expect(result.applied).toEqual(names);

    const recorded = await sql<{ migration_name: string; checksum: string; finished_at: Date | null; applied_steps_count: number }>(
      url,
      `SELECT migration_name, checksum, finished_at, applied_steps_count FROM _prisma_migrations ORDER BY migration_name`,
    );
    expect(recorded.map((r) => r.migration_name)).toEqual(names);
    for (const row of recorded) {
      const file = await readFile(join(MIGRATIONS_DIR, row.migration_name, "migration.sql"));
      expect(row.checksum).toBe(createHash("sha256").update(file).digest("hex"));
      expect(row.finished_at).toBeInstanceOf(Date);
      expect(row.applied_steps_count).toBe(1);
    }
    const tables = await sql<{ table_name: string }>(url, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`);
    expect(tables.map((t) => t.table_name)).toEqual(
      expect.arrayContaining(["api_keys", "deliveries", "delivery_attempts", "events", "signing_secrets", "subscriptions"]),
    );

    expect((await applyMigrations(url, quiet)).applied).toEqual([]);
  });

  it("is safe when two processes apply migrations at once", async () => {
    const name = freshName();
    const url = databaseUrl(name);
    const env = { ...process.env, DATABASE_URL: url };
    const results = await Promise.all([
      run("npm", ["run", "--silent", "migrate"], { cwd: ROOT, env }),
      run("npm", ["run", "--silent", "migrate"], { cwd: ROOT, env }),
    ]);
    const outputs = results.map((r) => r.stdout).join("\n");
    // One process applied everything; the other waited for the lock and found nothing to do.
    expect(outputs).toMatch(/applied \d+ migration\(s\)/);
    expect(outputs).toContain("database is up to date");
    const rows = await sql<{ migration_name: string; n: string }>(url, `SELECT migration_name, count(*) AS n FROM _prisma_migrations GROUP BY 1`);
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) expect(Number(row.n)).toBe(1);
  });

  it("rolls a failing migration back entirely and stops there", async () => {
    const dir = await mkdtemp(join(tmpdir(), "migrations-"));
    try {
      await mkdir(join(dir, "001_good"));
      await writeFile(join(dir, "001_good", "migration.sql"), "CREATE TABLE good (id int);");
      await mkdir(join(dir, "002_bad"));
      await writeFile(join(dir, "002_bad", "migration.sql"), "CREATE TABLE half (id int);\nSELECT * FROM no_such_table;");
      await mkdir(join(dir, "003_later"));
      await writeFile(join(dir, "003_later", "migration.sql"), "CREATE TABLE later (id int);");
      const url = databaseUrl(freshName());

      await expect(applyMigrations(url, quiet, dir)).rejects.toThrow(/002_bad failed/);
      const tables = await sql<{ table_name: string }>(url, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`);
      expect(tables.map((t) => t.table_name)).toEqual(["_prisma_migrations", "good"]);
      const recorded = await sql<{ migration_name: string }>(url, `SELECT migration_name FROM _prisma_migrations`);
      expect(recorded.map((r) => r.migration_name)).toEqual(["001_good"]);

      // Fixed, the next start applies the rest.
      await writeFile(join(dir, "002_bad", "migration.sql"), "CREATE TABLE half (id int);");
      expect((await applyMigrations(url, quiet, dir)).applied).toEqual(["002_bad", "003_later"]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
