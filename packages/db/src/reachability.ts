import { postgresUnreachableMessage } from "@webhooks/core";
import pg from "pg";

/**
 * Undefined when PostgreSQL accepts a connection at `url`, else a one-line message saying what
 * failed and how to start it. A missing database counts as reachable: the migrations create it.
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
    return postgresUnreachableMessage(url, code && !message.includes(code) ? `${code} ${message}` : message || String(code));
  } finally {
    await client.end().catch(() => {});
  }
}
