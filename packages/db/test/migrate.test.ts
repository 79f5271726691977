import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
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

/** The service's migrations, in the order they apply. */
async function migrationNames(): Promise<string[]> {
  return (await readdir(MIGRATIONS_DIR, { withFileTypes: true }))
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
}

afterEach(async () => {
  for (const name of created.splice(0)) await sql(ADMIN_DATABASE_URL, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
});

describe("applyMigrations", () => {
  it("creates a missing database and records every migration the way Prisma does", async () => {
    const url = databaseUrl(freshName());
    const result = await applyMigrations(url, quiet);
    const names = await migrationNames();
    expect(result.applied).toEqual(names);

    const recorded = await sql<{
      migration_name: string;
      checksum: string;
      finished_at: Date | null;
      applied_steps_count: number;
    }>(
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
    const tables = await sql<{ table_name: string }>(
      url,
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`,
    );
    expect(tables.map((t) => t.table_name)).toEqual(
      expect.arrayContaining([
        "api_keys",
        "deliveries",
        "delivery_attempts",
        "events",
        "signing_secrets",
        "subscriptions",
      ]),
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
    const rows = await sql<{ migration_name: string; n: string }>(
      url,
      `SELECT migration_name, count(*) AS n FROM _prisma_migrations GROUP BY 1`,
    );
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) expect(Number(row.n)).toBe(1);
  });

  it("rolls a failing migration back entirely and stops there", async () => {
    const dir = await mkdtemp(join(tmpdir(), "migrations-"));
    try {
      await mkdir(join(dir, "001_good"));
      await writeFile(join(dir, "001_good", "migration.sql"), "CREATE TABLE good (id int);");
      await mkdir(join(dir, "002_bad"));
      await writeFile(
        join(dir, "002_bad", "migration.sql"),
        "CREATE TABLE half (id int);\nSELECT * FROM no_such_table;",
      );
      await mkdir(join(dir, "003_later"));
      await writeFile(join(dir, "003_later", "migration.sql"), "CREATE TABLE later (id int);");
      const url = databaseUrl(freshName());

      await expect(applyMigrations(url, quiet, dir)).rejects.toThrow(/002_bad failed/);
      const tables = await sql<{ table_name: string }>(
        url,
        `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`,
      );
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

describe("the migration that moves the attempt in flight onto its delivery", () => {
  const MIGRATION = "20261126050000_open_attempt_on_delivery";

  it("keeps every attempt of a database upgraded mid-send: the open one in flight, the ended ones as they were", async () => {
    // The migrations before it, applied to a database that then gets an attempt in flight.
    const names = await migrationNames();
    const dir = await mkdtemp(join(tmpdir(), "migrations-"));
    try {
      for (const name of names.filter((n) => n < MIGRATION))
        await cp(join(MIGRATIONS_DIR, name), join(dir, name), { recursive: true });
      const url = databaseUrl(freshName());
      await applyMigrations(url, quiet, dir);
      await sql(
        url,
        `
        INSERT INTO deliveries (id, subscription_id, event_id, event_type, url, secret_id, attempts, attempt_open, lease_token, leased_until, next_attempt_at) VALUES
          ('dlv_open', 'sub_1', 'evt_1', 't', 'https://example.com/a', 'sec_1', 2, true, 'lease', now() + interval '1 minute', now()),
          ('dlv_done', 'sub_1', 'evt_2', 't', 'https://example.com/b', 'sec_1', 1, false, NULL, NULL, NULL)`,
      );
      await sql(
        url,
        `
        INSERT INTO delivery_attempts (id, delivery_id, number, url, started_at, duration_ms, response_code) VALUES
          ('att_1', 'dlv_open', 1, 'https://example.com/a', '2026-11-26T01:00:00Z', 30, 500),
          ('att_2', 'dlv_open', 2, 'https://example.com/a', '2026-11-26T01:00:05Z', NULL, NULL),
          ('att_3', 'dlv_done', 1, 'https://example.com/b', '2026-11-26T01:00:00Z', 12, 200)`,
      );

      expect((await applyMigrations(url, quiet)).applied).toEqual(names.filter((n) => n >= MIGRATION));
      const log = await sql<{
        id: string;
        delivery_id: string;
        number: number;
        started_at: Date;
        duration_ms: number | null;
      }>(
        url,
        "SELECT id, delivery_id, number, started_at, duration_ms FROM delivery_attempt_log ORDER BY delivery_id, number",
      );
      expect(log).toEqual([
        {
          id: "att_3",
          delivery_id: "dlv_done",
          number: 1,
          started_at: new Date("2026-11-26T01:00:00Z"),
          duration_ms: 12,
        },
        {
          id: "att_1",
          delivery_id: "dlv_open",
          number: 1,
          started_at: new Date("2026-11-26T01:00:00Z"),
          duration_ms: 30,
        },
        {
          id: "att_2",
          delivery_id: "dlv_open",
          number: 2,
          started_at: new Date("2026-11-26T01:00:05Z"),
          duration_ms: null,
        },
      ]);
      // The one in flight now lives on its delivery only, so that its record can insert it.
      expect(await sql(url, "SELECT id FROM delivery_attempts WHERE delivery_id = 'dlv_open'")).toEqual([
        { id: "att_1" },
      ]);
      expect(await sql(url, "SELECT id, open_attempt_id FROM deliveries ORDER BY id")).toEqual([
        { id: "dlv_done", open_attempt_id: null },
        { id: "dlv_open", open_attempt_id: "att_2" },
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("the migration that gives attempts their subscription, for the stats", () => {
  const MIGRATION = "20261128040000_subscription_stats";

  it("fills subscription_id and timed_out from what the log holds, and drops attempts whose delivery is gone", async () => {
    const names = await migrationNames();
    const dir = await mkdtemp(join(tmpdir(), "migrations-"));
    try {
      for (const name of names.filter((n) => n < MIGRATION))
        await cp(join(MIGRATIONS_DIR, name), join(dir, name), { recursive: true });
      const url = databaseUrl(freshName());
      await applyMigrations(url, quiet, dir);
      await sql(
        url,
        `INSERT INTO deliveries (id, subscription_id, event_id, event_type, url, secret_id)
         VALUES ('dlv_1', 'sub_1', 'evt_1', 't', 'https://example.com/a', 'sec_1')`,
      );
      await sql(
        url,
        `INSERT INTO delivery_attempts (id, delivery_id, number, url, started_at, duration_ms, response_code, error)
         SELECT 'att_' || n, d, n, 'https://example.com/a', now(), 10, code, error
         FROM (VALUES (1, 'dlv_1', 200, NULL), (2, 'dlv_1', NULL, 'timeout after 300 ms'), (3, 'dlv_1', NULL, 'connect timeout'),
                      (4, 'dlv_1', NULL, 'OAuth2 token request failed: timeout after 1000 ms'), (5, 'dlv_1', NULL, 'connection refused'),
                      (6, 'dlv_1', 200, 'response body incomplete: timeout after 300 ms'), (7, 'dlv_gone', 500, NULL))
           AS a(n, d, code, error)`,
      );

      expect((await applyMigrations(url, quiet)).applied).toEqual(names.filter((n) => n >= MIGRATION));
      expect(await sql(url, "SELECT id, subscription_id, timed_out FROM delivery_attempts ORDER BY id")).toEqual([
        { id: "att_1", subscription_id: "sub_1", timed_out: false },
        { id: "att_2", subscription_id: "sub_1", timed_out: true },
        { id: "att_3", subscription_id: "sub_1", timed_out: true },
        { id: "att_4", subscription_id: "sub_1", timed_out: true },
        { id: "att_5", subscription_id: "sub_1", timed_out: false },
        { id: "att_6", subscription_id: "sub_1", timed_out: false },
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
