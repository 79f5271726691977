import { SecretBox } from "@webhooks/core";
import { createDatabase, type Database } from "@webhooks/db";
import { createTestDatabase, type TestDatabase } from "@webhooks/testing";
import { afterAll, beforeAll } from "vitest";

/**
 * For a test file of this package: a database of its own (a copy of the suite's migrated
 * template) and a pool of two connections on it, made before the file's tests and dropped after
 * them. Call it at the top of the file, before its own hooks; read `url` and `database` in them.
 */
export function fileDatabase(): { readonly url: string; readonly database: Database } {
  let testDb: TestDatabase | undefined;
  let database: Database | undefined;
  beforeAll(async () => {
    testDb = await createTestDatabase();
    database = createDatabase({ databaseUrl: testDb.url, poolSize: 2 });
  });
  afterAll(async () => {
    await database?.close();
    await testDb?.drop();
  });
  const ready = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error("fileDatabase: read before the file's beforeAll");
    return value;
  };
  return {
    get url() {
      return ready(testDb).url;
    },
    get database() {
      return ready(database);
    },
  };
}

/** What createSubscription needs, on that database: a fixed secret key; http and loopback allowed. */
export function subscriptionContext(database: Database) {
  return {
    db: database.prisma,
    secretBox: new SecretBox(Buffer.alloc(32, 7)),
    destinationPolicy: { allowHttp: true, allowPrivateNetworks: true },
    defaultMaxInFlight: 10,
  };
}
