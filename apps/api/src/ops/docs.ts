import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Hono } from "hono";
import { absolutePath } from "swagger-ui-dist";
import type { ApiEnv } from "../http/types.ts";

/**
 * Interactive API docs at /docs: Swagger UI, served from the swagger-ui-dist package rather than
 * a CDN, so the docs work on machines without internet access.
 *
 * The page shares its origin with the customer portal, and an operator pastes an unscoped API key
 * into it, so the key is not kept in localStorage (`persistAuthorization: false`), and a strict
 * content security policy forbids inline scripts: the start-up script is an asset of its own.
 * Swagger UI sets inline styles, hence `'unsafe-inline'` for styles only. `validatorUrl: null`
 * turns off the badge that would load an image from validator.swagger.io.
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
  <script src="/docs/assets/docs-init.js"></script>
</body>
</html>`;

const initScript = `window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", persistAuthorization: false, validatorUrl: null });\n`;

const pageHeaders = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
};

/** A Map, not an object: a name such as `constructor` must not find the object's own properties. */
const assets = new Map([
  ["swagger-ui.css", "text/css; charset=utf-8"],
  ["swagger-ui-bundle.js", "text/javascript; charset=utf-8"],
]);

export function docsRoutes() {
  const cache = new Map<string, Promise<Buffer>>();
  return new Hono<ApiEnv>()
    .get("/docs", (c) => c.html(page, 200, pageHeaders))
    .get("/docs/assets/docs-init.js", (c) =>
      c.body(initScript, 200, { "content-type": "text/javascript; charset=utf-8", "cache-control": "no-cache" }),
    )
    .get("/docs/assets/:file", async (c) => {
      const file = c.req.param("file");
      const type = assets.get(file);
      if (!type) return c.notFound();
      if (!cache.has(file)) cache.set(file, readFile(join(absolutePath(), file)));
      const body = await cache.get(file)!;
      return c.body(new Uint8Array(body), 200, { "content-type": type, "cache-control": "public, max-age=86400" });
    });
}
