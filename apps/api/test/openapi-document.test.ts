import type { TestApi } from "@webhooks/api/testing";
import { describe, expect } from "vitest";
import { apiTest } from "./fixtures.ts";

/** The OpenAPI document the API serves, as a client generator and a reader rely on it. */
const test = apiTest();

interface OpenApiOperation {
  operationId: string;
  description?: string;
  requestBody?: object;
  responses: Record<string, { headers?: Record<string, object> }>;
}

async function openApiDocument(api: TestApi): Promise<{ paths: Record<string, Record<string, OpenApiOperation>> }> {
  const response = await fetch(`${api.baseUrl}/openapi.json`);
  expect(response.status).toBe(200);
  return (await response.json()) as { paths: Record<string, Record<string, OpenApiOperation>> };
}

describe("the OpenAPI document", () => {
  test("documents, on every operation, the statuses any /v1 request can get, and their headers", async ({ api }) => {
    const document = await openApiDocument(api);
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const where = `${operation.operationId} (${method.toUpperCase()} ${path})`;
        expect(operation.operationId, where).toMatch(/^[a-z][A-Za-z]+$/);
        expect(operation.description, where).toEqual(expect.any(String));
        expect(Object.keys(operation.responses), where).toEqual(
          expect.arrayContaining(["400", "401", "405", "429", "500", "503"]),
        );
        if (operation.requestBody)
          expect(Object.keys(operation.responses), where).toEqual(expect.arrayContaining(["413", "415"]));
        if (path.includes("{")) expect(Object.keys(operation.responses), where).toContain("404");
        for (const [status, response] of Object.entries(operation.responses)) {
          expect(Object.keys(response.headers ?? {}), `${where} ${status}`).toContain("request-id");
        }
        expect(Object.keys(operation.responses["405"]!.headers ?? {}), where).toContain("Allow");
        for (const status of ["429", "503"])
          expect(Object.keys(operation.responses[status]!.headers ?? {}), `${where} ${status}`).toContain(
            "Retry-After",
          );
      }
    }
    expect(Object.keys(document.paths["/v1/events"]!.post!.responses["202"]!.headers ?? {})).toContain(
      "Idempotent-Replayed",
    );
  });
});
