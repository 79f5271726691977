import { applyMigrations } from "@webhooks/db";
import { deleteKeysMatching } from "@webhooks/queue";
import { withClient } from "@webhooks/testing";
import { Redis } from "ioredis";
import { onCleanup } from "./cleanup.ts";
import { ADMIN_DATABASE_URL, REDIS_URL, RUN_ID, RUN_PREFIX } from "./config.ts";

const PREFIX = "webhooks_bench_";
const created = new Set<string>();
const admin = (sql: string, params: unknown[] = []) => withClient(ADMIN_DATABASE_URL, (db) => db.query(sql, params));

// FORCE: a child we killed may leave a connection behind for a moment.
export const dropDatabase = (name: string) => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);

/** Drops the bench databases nobody is connected to, left by a killed run; another run's in use stays. */
export async function dropLeftoverDatabases(): Promise<void> {
  const { rows } = await admin(
    `SELECT datname FROM pg_database d WHERE starts_with(datname, $1)
       AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)`,
    [PREFIX],
  );
  // Without FORCE: a run that connected since the check keeps its database.
  for (const { datname } of rows) await admin(`DROP DATABASE IF EXISTS "${datname}"`).catch(() => {});
}

/** A fresh, migrated database of this run (no bloat or plans of an earlier measurement), dropped at its end. */
export async function freshDatabase(label: string): Promise<{ name: string; url: string }> {
  const name = `${PREFIX}${RUN_ID}_${label}`;
  await dropDatabase(name);
  await admin(`CREATE DATABASE "${name}"`);
  if (!created.has(name)) onCleanup(`drop database ${name}`, () => dropDatabase(name).then(() => {}));
  created.add(name);
  const url = new URL(ADMIN_DATABASE_URL);
  url.pathname = `/${name}`;
  await applyMigrations(url.toString(), { info: () => {}, warn: (message) => console.warn(message) });
  return { name, url: url.toString() };
}

/** Deletes every Redis key of this run (all queue prefixes start with RUN_PREFIX), or those under a narrower prefix. */
export async function deleteRunKeys(prefix: string = RUN_PREFIX): Promise<number> {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  redis.on("error", () => {}); // failures surface through the commands' own errors
  return deleteKeysMatching(redis, `${prefix}*`).finally(() => redis.disconnect());
}
