import { createHash, randomUUID } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import pg from "pg";

/**
 * Applies prisma/migrations/<name>/migration.sql in name order, recording each in Prisma's own
 * `_prisma_migrations` table (same columns, same SHA-256 checksum), so `prisma migrate status`
 * agrees with us. We run them ourselves because Prisma's migration engine is a native binary
 * that is downloaded on first use, which air-gapped machines cannot do.
 *
 * Several processes may start at once (API and workers): a PostgreSQL advisory lock makes one of
 * them apply the migrations while the others wait, then find nothing left to do. Each migration
 * runs in its own transaction, so a failing one leaves no trace and the next start tries again.
 */
export const MIGRATIONS_DIR = fileURLToPath(new URL("../../../prisma/migrations", import.meta.url));

/** Any constant shared by every process of the service; 'whmigr' in ASCII. */
const MIGRATION_LOCK_KEY = 0x77686d69677272n;

export interface MigrationLogger {
  info(message: string): void;
  warn(message: string): void;
}

export interface MigrationResult {
  applied: string[];
}

interface Migration {
  name: string;
  sql: string;
  checksum: string;
}

async function readMigrations(dir: string): Promise<Migration[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const names = entries
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
  return Promise.all(
    names.map(async (name) => {
      const sql = await readFile(`${dir}/${name}/migration.sql`, "utf8");
      return { name, sql, checksum: createHash("sha256").update(sql).digest("hex") };
    }),
  );
}

export async function applyMigrations(
  databaseUrl: string,
  logger: MigrationLogger,
  dir: string = MIGRATIONS_DIR,
): Promise<MigrationResult> {
  const migrations = await readMigrations(dir);
  await createDatabaseIfMissing(databaseUrl, logger);
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK_KEY.toString()]);
    await client.query(`CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
      "id" VARCHAR(36) PRIMARY KEY NOT NULL,
      "checksum" VARCHAR(64) NOT NULL,
      "finished_at" TIMESTAMPTZ,
      "migration_name" VARCHAR(255) NOT NULL,
      "logs" TEXT,
      "rolled_back_at" TIMESTAMPTZ,
      "started_at" TIMESTAMPTZ NOT NULL DEFAULT now(),
      "applied_steps_count" INTEGER NOT NULL DEFAULT 0
    )`);
    const { rows } = await client.query<{ migrationName: string; checksum: string }>(
      `SELECT migration_name AS "migrationName", checksum FROM "_prisma_migrations"
       WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL`,
    );
    const done = new Map(rows.map((row) => [row.migrationName, row.checksum]));

    const applied: string[] = [];
    for (const migration of migrations) {
      const checksum = done.get(migration.name);
      if (checksum !== undefined) {
        if (checksum !== migration.checksum) {
          logger.warn(`migration ${migration.name} was modified after it was applied`);
        }
        continue;
      }
      await client.query("BEGIN");
      try {
        await client.query(migration.sql);
        await client.query(
          `INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at, finished_at, applied_steps_count)
           VALUES ($1, $2, $3, now(), clock_timestamp(), 1)`,
          [randomUUID(), migration.checksum, migration.name],
        );
        await client.query("COMMIT");
      } catch (error) {
        await client.query("ROLLBACK");
        throw new Error(`migration ${migration.name} failed: ${(error as Error).message}`, { cause: error });
      }
      applied.push(migration.name);
      logger.info(`applied migration ${migration.name}`);
    }
    const known = new Set(migrations.map((migration) => migration.name));
    for (const name of done.keys()) {
      if (!known.has(name)) logger.warn(`the database has migration ${name}, which this version does not know`);
    }
    return { applied };
  } finally {
    // Closing the session releases the advisory lock.
    await client.end();
  }
}

/**
 * On a fresh machine the service's database does not exist yet; create it, as `prisma migrate
 * dev` would, so that the quick start needs no manual step. Needs the CREATEDB privilege, which
 * a production role usually lacks: there the database is created beforehand and this is a no-op.
 */
async function createDatabaseIfMissing(databaseUrl: string, logger: MigrationLogger): Promise<void> {
  const probe = new pg.Client({ connectionString: databaseUrl });
  try {
    await probe.connect();
    return;
  } catch (error) {
    if ((error as { code?: string }).code !== "3D000") throw error;
  } finally {
    await probe.end().catch(() => {});
  }
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = "/postgres";
  const admin = new pg.Client({ connectionString: url.toString() });
  const cannotCreate = (error: unknown) =>
    new Error(
      `database ${name} does not exist, and the role in DATABASE_URL cannot create it (${(error as Error).message}): create it beforehand, or grant the role CREATEDB`,
      { cause: error },
    );
  await admin.connect().catch((error: unknown) => {
    throw cannotCreate(error);
  });
  try {
    await admin.query(`CREATE DATABASE "${name.replaceAll('"', '""')}"`);
    logger.info(`created database ${name}`);
  } catch (error) {
    // Another process created it in the meantime (42P04), or at the same instant (23505).
    const code = (error as { code?: string }).code;
    if (code === "42501") throw cannotCreate(error);
    if (code !== "42P04" && code !== "23505") throw error;
  } finally {
    await admin.end();
  }
}
