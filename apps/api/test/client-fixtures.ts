import type { TestApi } from "@webhooks/api/testing";
import { createWebhooksClient } from "@webhooks/client";
import { spawnService, startReceiver, TEST_API_KEY } from "@webhooks/testing";
import { expect } from "vitest";
import { apiTest } from "./fixtures.ts";

/**
 * What the tests of packages/client share: the typed client against the real API on loopback,
 * recording every answer it gets, so that client.test.ts can fail if the OpenAPI document has an
 * operation it does not exercise. Each test file has its own copy of this module's state.
 */

/** What the receiver answers: 500 while a test wants deliveries to fail. */
export const receiverAnswers = { status: 200 };

/** Per `METHOD /schema/path`: the statuses this file got through the client. */
export const answered = new Map<string, number[]>();
export const requestIds: (string | null)[] = [];

/** apiTest, with a worker delivering to a real receiver. */
export const clientTest = apiTest()
  // The worker, started for the file whether or not a test names it; it says it is ready in its log.
  .extend("worker", { scope: "file", auto: true }, async ({ env }, { onCleanup }) => {
    const worker = await spawnService("worker", { ...env, LOG_LEVEL: "info" });
    onCleanup(async () => {
      worker.kill("SIGTERM");
      await worker.exited;
    });
    return worker;
  })
  .extend("receiver", { scope: "file" }, async ({}, { onCleanup }) => {
    const receiver = await startReceiver(() => ({ status: receiverAnswers.status }));
    onCleanup(() => receiver.close());
    return receiver;
  });

interface OpenApiOperation {
  operationId: string;
  description?: string;
  requestBody?: object;
  responses: Record<string, { headers?: Record<string, object> }>;
}

export async function openApiDocument(
  api: TestApi,
): Promise<{ paths: Record<string, Record<string, OpenApiOperation>> }> {
  const response = await fetch(`${api.baseUrl}/openapi.json`);
  expect(response.status).toBe(200);
  return (await response.json()) as { paths: Record<string, Record<string, OpenApiOperation>> };
}

/** The typed client, recording each answer in `answered` and `requestIds`. */
export function client(api: TestApi, apiKey = TEST_API_KEY) {
  const typed = createWebhooksClient({ baseUrl: api.baseUrl, apiKey });
  typed.use({
    onResponse({ request, schemaPath, response }) {
      const operation = `${request.method} ${schemaPath}`;
      answered.set(operation, [...(answered.get(operation) ?? []), response.status]);
      requestIds.push(response.headers.get("request-id"));
    },
  });
  return typed;
}
