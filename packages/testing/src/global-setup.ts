// vitest globalSetup: builds the template database every test file copies.
import { createTemplateDatabase } from "./database.ts";

export async function setup(): Promise<void> {
  await createTemplateDatabase();
}
