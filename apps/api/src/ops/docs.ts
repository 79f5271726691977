import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Hono } from "hono";
import { absolutePath } from "swagger-ui-dist";
import type { ApiEnv } from "../http/types.ts";

/**
 * Interactive API docs at /docs: Swagger UI, served from the swagger-ui-dist package rather than
 * a CDN, so the docs work on machines without internet access.
 */
const page = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8" />
  <title>Webhook Delivery Service API</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css" />
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script>window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", persistAuthorization: true });</script>
</body>
</html>`;

/** A Map, not an object: a name such as `constructor` must not find the object's own properties. */
const assets = new Map([
  ["swagger-ui.css", "text/css; charset=utf-8"],
  ["swagger-ui-bundle.js", "text/javascript; charset=utf-8"],
]);

export function docsRoutes() {
  const cache = new Map<string, Promise<Buffer>>();
  return new Hono<ApiEnv>()
    .get("/docs", (c) => c.html(page))
    .get("/docs/assets/:file", async (c) => {
      const file = c.req.param("file");
      const type = assets.get(file);
      if (!type) return c.notFound();
      if (!cache.has(file)) cache.set(file, readFile(join(absolutePath(), file)));
      const body = await cache.get(file)!;
      return c.body(new Uint8Array(body), 200, { "content-type": type, "cache-control": "public, max-age=86400" });
    });
}
