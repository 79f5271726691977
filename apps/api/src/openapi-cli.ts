import { writeFile } from "node:fs/promises";
import { createLogger, loadConfig } from "@webhooks/core";
import { createApp } from "./app.ts";
import { connectApiDeps } from "./deps.ts";

/**
 * Writes the OpenAPI document the API serves at /openapi.json to a file (default
 * apps/api/openapi.json), for the linters and for packages/client's generated types. It asks the
 * real app for it, so the file is exactly what is served. The configuration is the defaults, never
 * the environment's, so the file is the same on every machine. Building the app opens no
 * PostgreSQL connection (the pool connects on first query); Redis need not be up either.
 */
const output = process.argv[2] ?? new URL("../openapi.json", import.meta.url).pathname;

const config = loadConfig({ LOG_LEVEL: "silent" });
const deps = await connectApiDeps(config, createLogger({ level: "silent", name: "openapi" }), {
  redisReadyTimeoutMs: 1,
});
try {
  const response = await createApp(deps).request("/openapi.json");
  if (response.status !== 200) throw new Error(`GET /openapi.json answered ${response.status}`);
  const document: unknown = await response.json();
  await writeFile(output, `${JSON.stringify(document, null, 2)}\n`);
} finally {
  await deps.close();
}
