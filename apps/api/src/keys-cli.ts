// `npm run keys -- create --name <name> [--tenant <tenant id>] | list | revoke <key id>`: manages stored API keys.
import { parseArgs } from "node:util";
import { isTenantId, loadConfigOrExit, redactUrl, TENANT_ID_RULE } from "@webhooks/core";
import { applyMigrations, checkPostgres, createApiKey, createDatabase, listApiKeys, revokeApiKey } from "@webhooks/db";

const usage = `Usage:
  npm run keys -- create --name <name>   create a key and print it (shown once)
      [--tenant <tenant id>]             scoped to one tenant: it sees and changes only that
                                         tenant's resources, and cannot publish events
  npm run keys -- list                   list keys (prefix, name, created, revoked, scope)
  npm run keys -- revoke <key id>        revoke a key; requests with it, or with a portal session
                                         it created, fail within seconds

Keys are stored in the database at DATABASE_URL: give this command the same DATABASE_URL as the
service. To capture a new key, keep npm quiet: KEY=$(npm run --silent keys -- create --name ci)`;

function fail(message: string): never {
  console.error(message);
  process.exit(1);
}

const { positionals, values } = (() => {
  try {
    return parseArgs({
      allowPositionals: true,
      options: { name: { type: "string" }, tenant: { type: "string" }, help: { type: "boolean", short: "h" } },
    });
  } catch (error) {
    return fail(`${(error as Error).message}\n${usage}`);
  }
})();
const [command, ...rest] = positionals;
if (values.help) {
  console.log(usage);
  process.exit(0);
}
if (command === undefined) fail(usage);
// Checked before anything is written, like --name below.
const tenant = values.tenant;
if (tenant !== undefined && command !== "create") fail(`--tenant applies to create only\n${usage}`);
if (tenant !== undefined && !isTenantId(tenant)) fail(`--tenant ${TENANT_ID_RULE} (got ${JSON.stringify(tenant)})`);

// `npm run` without --silent prints its own banner (the command line) on standard output before
// we start, so `KEY=$(npm run keys -- create)` would capture that banner with the key. Refuse
// before a key exists rather than hand out one that is lost in the noise.
const npmBannerOnStdout = process.env.npm_lifecycle_event !== undefined && process.env.npm_config_loglevel !== "silent";
if (command === "create" && npmBannerOnStdout && !process.stdout.isTTY) {
  fail(
    "npm printed its own banner on standard output, so what you capture would not be the key alone. " +
      "Run it with --silent: KEY=$(npm run --silent keys -- create --name <name>)",
  );
}

const config = loadConfigOrExit();
// The service and this command must share a database, and a wrong DATABASE_URL would otherwise
// go unnoticed: the migrations below create a database that does not exist yet.
const source = process.env.DATABASE_URL ? "DATABASE_URL" : "the default; set DATABASE_URL to the service's";
console.error(`Database: ${redactUrl(config.databaseUrl)} (${source})`);
const problem = await checkPostgres(config.databaseUrl);
if (problem) fail(problem);
await applyMigrations(config.databaseUrl, {
  info: (message) => {
    if (message.startsWith("created database")) {
      console.error(`It did not exist: ${message}. If the service uses another database, set DATABASE_URL to its URL.`);
    }
  },
  warn: (message) => console.warn(`warning: ${message}`),
});
const database = createDatabase({
  databaseUrl: config.databaseUrl,
  poolSize: 1,
  queryTimeoutMs: config.databaseQueryTimeoutMs,
});
const db = database.prisma;

try {
  switch (command) {
    case "create": {
      const name = values.name?.trim();
      if (!name) fail(`create needs --name <name>\n${usage}`);
      const { key, record } = await createApiKey({ db }, { name, tenantId: tenant ?? null });
      // The key goes to stdout alone, so `KEY=$(npm run --silent keys -- create --name x)` works.
      const where = process.stdout.isTTY
        ? "here, and this is the only time it is shown:"
        : "on standard output; it is never shown again.";
      const scope = record.tenantId === null ? "" : `, scoped to tenant ${record.tenantId}`;
      console.error(`Created ${record.id} (${record.name}${scope}). The key is ${where}`);
      console.log(key);
      break;
    }
    case "list": {
      const keys = await listApiKeys({ db });
      if (keys.length === 0) console.log("No stored keys.");
      for (const key of keys) {
        const state = key.revokedAt ? `revoked ${key.revokedAt.toISOString()}` : "active";
        const scope = key.tenantId === null ? "unscoped" : `tenant ${key.tenantId}`;
        console.log(
          `${key.id}  ${key.prefix}…  ${key.name}  created ${key.createdAt.toISOString()}  ${state}  ${scope}`,
        );
      }
      break;
    }
    case "revoke": {
      const id = rest[0];
      if (!id) fail(`revoke needs a key id\n${usage}`);
      // Revoking twice changes nothing and says so; it exits 0 because what was asked holds.
      const earlier = (await listApiKeys({ db })).find((key) => key.id === id);
      if (earlier?.revokedAt) {
        console.log(
          `${earlier.id} (${earlier.name}) was already revoked at ${earlier.revokedAt.toISOString()}; nothing changed`,
        );
        break;
      }
      const record = await revokeApiKey({ db }, id).catch((error: Error) => fail(error.message));
      console.log(`Revoked ${record.id} (${record.name})`);
      break;
    }
    default:
      fail(`Unknown command: ${command}\n${usage}`);
  }
} finally {
  await database.close();
}
