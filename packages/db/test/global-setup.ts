// vitest globalSetup (vitest.config.ts): builds the template database every test file copies,
// with this package's migrations. It lives here, not in @webhooks/testing, so that the testing
// helpers do not depend on the package whose tests use them.
import { createTemplateDatabase } from "@webhooks/testing";
import { applyMigrations } from "../src/migrate.ts";

export async function setup(): Promise<void> {
  await createTemplateDatabase((databaseUrl) => applyMigrations(databaseUrl, { info: () => {}, warn: () => {} }));
}
