// `npm run migrate`: applies pending migrations and exits. The API and the worker also do this
// at start-up; this is for deploy pipelines that migrate as a separate step.
import { connectionFailureReason, loadConfigOrExit } from "@webhooks/core";
import { applyMigrations } from "./migrate.ts";

const config = loadConfigOrExit();
const result = await applyMigrations(config.databaseUrl, {
  info: (message) => console.log(message),
  warn: (message) => console.warn(`warning: ${message}`),
}).catch((error: unknown) => {
  console.error(`Cannot apply the migrations: ${connectionFailureReason(error)}`);
  process.exit(1);
});
console.log(result.applied.length === 0 ? "database is up to date" : `applied ${result.applied.length} migration(s)`);
