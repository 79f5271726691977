import type { Config, Logger, SecretBox } from "@webhooks/core";
import type { PrismaClient, SqlClient } from "@webhooks/db";
import type { DeliveryQueue, RedisConnection } from "@webhooks/queue";

/** Everything the API needs from the outside world, built once in main.ts (or by a test). */
export interface ApiDeps {
  config: Config;
  db: PrismaClient;
  /** The same pool as `db`, for the hot statements (see packages/db/src/sql.ts). */
  sql: SqlClient;
  redis: RedisConnection;
  queue: DeliveryQueue;
  logger: Logger;
  secretBox: SecretBox;
  authenticator: Authenticator;
}

export interface ApiEnv {
  Variables: {
    requestId: string;
    logger: Logger;
    apiKeyId: string;
  };
}

/** Checks an API key (auth.ts's ApiKeyAuthenticator): the key's id, or undefined when invalid. */
export interface Authenticator {
  authenticate(key: string): Promise<string | undefined>;
}
