import { createDatabase, isDatabaseUnreachable } from "@webhooks/db";
import { expect, it } from "vitest";
import { fileDatabase } from "./file-database.ts";

const file = fileDatabase();

it("fails a statement unanswered for the query timeout as PostgreSQL out of reach, and drops its connection", async () => {
  // One connection, and a statement that outlasts the timeout, as one whose network path died.
  const database = createDatabase({ databaseUrl: file.url, poolSize: 1, queryTimeoutMs: 1_000 });
  try {
    const runs = [
      (work: string) => database.sql.query(work, []),
      (work: string) => database.sql.withConnection((sql) => sql.query(work, [])),
      (work: string) => database.sql.transaction((sql) => sql.query(work, [])),
    ];
    for (const run of runs) {
      const error = await run("SELECT pg_sleep(3)").then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      expect(error).toBeInstanceOf(Error);
      // The API answers it 503 and the worker parks the job, as in an outage.
      expect(isDatabaseUnreachable(error)).toBe(true);
      // The connection went with it: kept, the next statement would wait behind the sleep on it
      // and time out as well.
      expect(await run("SELECT 1 AS one")).toEqual([{ one: 1 }]);
    }
  } finally {
    await database.close();
  }
});
