import type pg from "pg";

const CROCKFORD = "'0123456789ABCDEFGHJKMNPQRSTVWXYZ'";
const CROCKFORD_TERMS = Array.from(
  { length: 10 },
  (_, i) => `substr(${CROCKFORD}, ((value >> ${5 * (9 - i)}) & 31)::int + 1, 1)`,
).join(" || ");

/** Creates `pg_temp.ulid(at, n)`: a valid ULID of the millisecond `at` whose last 10 characters encode n. */
export async function createUlidFunction(db: pg.Client): Promise<void> {
  // Crockford base32 of the low 50 bits, as one expression that PostgreSQL inlines (a call per row would dominate).
  await db.query(
    `CREATE FUNCTION pg_temp.crockford10(value bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT ${CROCKFORD_TERMS} $$`,
  );
  // STABLE, not IMMUTABLE: extract(epoch FROM timestamptz) is STABLE, and PostgreSQL inlines a
  // function only if its body is no more volatile than it is declared.
  await db.query(`
    CREATE FUNCTION pg_temp.ulid(at timestamptz, n bigint) RETURNS text LANGUAGE sql STABLE AS $$
      SELECT pg_temp.crockford10((extract(epoch FROM at) * 1000)::bigint) || '000000' || pg_temp.crockford10(n) $$`);
}

/**
 * Runs a bulk load without the tables' secondary indexes (rebuilt after, much faster) or foreign-key
 * checks (the rows are consistent by construction), then VACUUM ANALYZE, as autovacuum would leave them.
 */
export async function loadWithoutIndexes(db: pg.Client, tables: string[], load: () => Promise<void>): Promise<void> {
  await db.query("SET maintenance_work_mem = '512MB'");
  // Partial indexes stay: rebuilding one scans the whole table for the few rows it holds, while
  // keeping it costs a predicate check per row.
  const indexes = await db.query<{ indexname: string; indexdef: string }>(
    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY($1::text[]) AND indexname NOT LIKE '%_pkey' AND indexdef NOT LIKE '% WHERE %'",
    [tables],
  );
  for (const index of indexes.rows) await db.query(`DROP INDEX "${index.indexname}"`);
  await db.query("SET session_replication_role = replica");
  try {
    await load();
  } finally {
    await db.query("SET session_replication_role = origin");
  }
  for (const index of indexes.rows) await db.query(index.indexdef);
  for (const table of tables) await db.query(`VACUUM ANALYZE "${table}"`);
}
