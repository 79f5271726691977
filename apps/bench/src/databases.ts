import { applyMigrations } from "@webhooks/db";
import { deleteKeysMatching } from "@webhooks/queue";
import { withClient } from "@webhooks/testing";
import { Redis } from "ioredis";
import { onCleanup } from "./cleanup.ts";
import { ADMIN_DATABASE_URL, REDIS_URL, RUN_PREFIX } from "./settings.ts";

export function databaseUrl(name: string): string {
  const url = new URL(ADMIN_DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

async function admin(sql: string): Promise<void> {
  await withClient(ADMIN_DATABASE_URL, (client) => client.query(sql));
}

export async function dropDatabase(name: string): Promise<void> {
  // FORCE: a child we killed may leave a connection behind for a moment.
  await admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
}

/**
 * Drops the databases whose names start with `prefix` and that nobody is connected to: those a
 * killed run left behind. One in use (another run's, right now) is left alone.
 */
export async function dropIdleDatabases(prefix: string): Promise<void> {
  const names = await withClient(ADMIN_DATABASE_URL, async (client) => {
    const { rows } = await client.query<{ datname: string }>(
      `SELECT datname FROM pg_database d WHERE starts_with(datname, $1)
         AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)`,
      [prefix],
    );
    return rows.map((row) => row.datname);
  });
  for (const name of names) {
    // Without FORCE: a run that connected since the check keeps its database.
    await admin(`DROP DATABASE IF EXISTS "${name}"`).catch(() => {});
  }
}

const registered = new Set<string>();

/**
 * A fresh, empty database with the service's migrations applied, so every configuration starts
 * from the same state (no table bloat or cached plans from an earlier phase). Dropped at the end.
 */
export async function freshDatabase(name: string): Promise<string> {
  await dropDatabase(name);
  await admin(`CREATE DATABASE "${name}"`);
  if (!registered.has(name)) {
    registered.add(name);
    onCleanup(`drop database ${name}`, () => dropDatabase(name));
  }
  const url = databaseUrl(name);
  await applyMigrations(url, { info: () => {}, warn: (message) => console.warn(message) });
  return url;
}

/**
 * Columns that code older than this checkout uses and this schema no longer has, put back for a
 * `--baseline` run's services: the baseline runs on this checkout's schema (the same indexes and
 * tables for both), so the columns it still writes must exist. The current code never reads them.
 */
const COLUMNS_OLDER_CODE_USES = [
  // Until the attempt in flight moved onto its delivery (open_attempt_id), 2026-11-26.
  `ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS attempt_open boolean NOT NULL DEFAULT false`,
];

/** freshDatabase, for this checkout's services or for a `--baseline` checkout's (see COLUMNS_OLDER_CODE_USES). */
export async function freshDatabaseFor(name: string, baseline: string | undefined): Promise<string> {
  const url = await freshDatabase(name);
  if (baseline !== undefined) {
    await withClient(url, async (client) => {
      for (const statement of COLUMNS_OLDER_CODE_USES) await client.query(statement);
    });
  }
  return url;
}

/** Deletes every Redis key of this run (all queue prefixes start with RUN_PREFIX), or those under a narrower prefix. */
export async function deleteRunKeys(prefix: string = RUN_PREFIX): Promise<number> {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  redis.on("error", () => {}); // failures surface through the commands' own errors
  try {
    return await deleteKeysMatching(redis, `${prefix}*`);
  } finally {
    redis.disconnect();
  }
}
