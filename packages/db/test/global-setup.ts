// vitest globalSetup (vitest.config.ts): builds the template database every test file copies,
// with this package's migrations, under a name of this run's own, and drops it at the run's end.
// It lives here, not in @webhooks/testing, so that the testing helpers do not depend on the
// package whose tests use them.
import { randomBytes } from "node:crypto";
import { createTemplateDatabase, dropTemplateDatabase } from "@webhooks/testing";
import { applyMigrations } from "../src/migrate.ts";

export async function setup(): Promise<() => Promise<void>> {
  // Set before vitest starts the test processes, which inherit it.
  process.env.TEST_TEMPLATE_DATABASE ??= `webhooks_test_template_${randomBytes(4).toString("hex")}`;
  await createTemplateDatabase((databaseUrl) => applyMigrations(databaseUrl, { info: () => {}, warn: () => {} }));
  return dropTemplateDatabase;
}
