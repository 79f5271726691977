import { ConfigError, loadConfig } from "../src/config.ts";

/** The ConfigError that loadConfig throws for `env`; fails the test when it does not throw one. */
export function configError(env: Record<string, string | undefined>): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}
