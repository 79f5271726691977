import pg from "pg";

/**
 * Undefined when PostgreSQL accepts a connection at `url`, else the reason it did not. A missing
 * database counts as reachable: the migration runner creates it.
 */
export async function checkPostgres(url: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  client.on("error", () => {});
  try {
    await client.connect();
    return undefined;
  } catch (error) {
    const { code, message } = error as { code?: string; message: string };
    if (code === "3D000") return undefined;
    return code && !message.includes(code) ? `${code} ${message}` : message || String(code);
  } finally {
    await client.end().catch(() => {});
  }
}
