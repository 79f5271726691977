import { randomBytes } from "node:crypto";
import pg from "pg";

/**
 * Each test file gets a database of its own, copied from a template that has the migrations
 * applied (a copy takes a fraction of a second), so files can run in parallel without seeing
 * each other's rows. The template is built once per run by the global setup.
 */
export const ADMIN_DATABASE_URL = process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";
/**
 * The template of this suite run, named by the global setup (a name per run, so two runs on one
 * PostgreSQL server never rebuild each other's template).
 */
function templateName(): string {
  return process.env.TEST_TEMPLATE_DATABASE ?? "webhooks_test_template";
}

export function databaseUrl(name: string): string {
  const url = new URL(ADMIN_DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Runs `work` with one pg client on `url`. */
export async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  // A connection ended by the server (DROP DATABASE ... WITH (FORCE) during a clean-up) must fail
  // the query in progress, not crash the process through an unhandled 'error' event.
  client.on("error", () => {});
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  return withClient(ADMIN_DATABASE_URL, work);
}

/**
 * Builds the template with `migrate` (the db package's migrations: this package does not depend
 * on the one whose tests use it, see packages/db/test/global-setup.ts).
 */
export async function createTemplateDatabase(migrate: (databaseUrl: string) => Promise<unknown>): Promise<void> {
  const template = templateName();
  await admin(async (client) => {
    await client.query(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${template}`);
  });
  await migrate(databaseUrl(template));
}

/** Drops the run's template (the run's end; test files drop their own copies). */
export async function dropTemplateDatabase(): Promise<void> {
  await admin(async (client) => void (await client.query(`DROP DATABASE IF EXISTS ${templateName()} WITH (FORCE)`)));
}

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `webhooks_test_${randomBytes(6).toString("hex")}`;
  await admin(async (client) => {
    // Copying a template fails if another copy is being made at that instant; try again.
    for (let attempt = 1; ; attempt++) {
      try {
        await client.query(`CREATE DATABASE ${name} TEMPLATE ${templateName()}`);
        return;
      } catch (error) {
        if (attempt >= 20 || (error as { code?: string }).code !== "55006") throw error;
        await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 200));
      }
    }
  });
  return {
    url: databaseUrl(name),
    name,
    drop: () => admin(async (client) => void (await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))),
  };
}

/** Runs SQL against a test database, for arranging rows a test needs (e.g. shared timestamps). */
export function sql<T extends pg.QueryResultRow = pg.QueryResultRow>(
  url: string,
  text: string,
  values: unknown[] = [],
): Promise<T[]> {
  return withClient(url, async (client) => (await client.query<T>(text, values)).rows);
}
