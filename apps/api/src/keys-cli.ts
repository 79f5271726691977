// `npm run keys -- create --name <name> | list | revoke <key id>`: manages stored API keys.
import { parseArgs } from "node:util";
import { loadConfigOrExit } from "@webhooks/core";
import { applyMigrations, checkPostgres, createApiKey, createDatabase, listApiKeys, revokeApiKey } from "@webhooks/db";

const usage = `Usage:
  npm run keys -- create --name <name>   create a key and print it (shown once)
  npm run keys -- list                   list keys (prefix, name, created, revoked)
  npm run keys -- revoke <key id>        revoke a key; requests with it fail within seconds`;

function fail(message: string): never {
  console.error(message);
  process.exit(1);
}

const { positionals, values } = (() => {
  try {
    return parseArgs({ allowPositionals: true, options: { name: { type: "string" }, help: { type: "boolean", short: "h" } } });
  } catch (error) {
    return fail(`${(error as Error).message}\n${usage}`);
  }
})();
const [command, ...rest] = positionals;
if (values.help || command === undefined) fail(usage);

const config = loadConfigOrExit();
const problem = await checkPostgres(config.databaseUrl);
if (problem) fail(problem);
await applyMigrations(config.databaseUrl, { info: () => {}, warn: (message) => console.warn(`warning: ${message}`) });
const database = createDatabase({ databaseUrl: config.databaseUrl, poolSize: 1 });
const db = database.prisma;

try {
  switch (command) {
    case "create": {
      const name = values.name?.trim();
      if (!name) fail(`create needs --name <name>\n${usage}`);
      const { key, record } = await createApiKey({ db }, { name });
      // The key goes to stdout alone, so `KEY=$(npm run -s keys -- create --name x)` works.
      console.error(`Created ${record.id} (${record.name}). This is the only time the key is shown:`);
      console.log(key);
      break;
    }
    case "list": {
      const keys = await listApiKeys({ db });
      if (keys.length === 0) console.log("No stored keys.");
      for (const key of keys) {
        const state = key.revokedAt ? `revoked ${key.revokedAt.toISOString()}` : "active";
        console.log(`${key.id}  ${key.prefix}…  ${key.name}  created ${key.createdAt.toISOString()}  ${state}`);
      }
      break;
    }
    case "revoke": {
      const id = rest[0];
      if (!id) fail(`revoke needs a key id\n${usage}`);
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
