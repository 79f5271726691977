import { Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { brandedPage, DEFAULT_BRANDING, type PortalBranding } from "./branding.ts";
import { buildPortal, type PortalBundle } from "./bundle.ts";

export const PORTAL_PATH = "/portal";

/**
 * The page may load only what this origin serves and talk only to it: no CDN, no inline script
 * or style, no form posted elsewhere, not framed by another site (the buttons on it delete and
 * rotate things). `data:` images for the empty favicon and a logo given as a data: URL.
 */
export const PORTAL_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const pageHeaders = {
  "content-type": "text/html; charset=utf-8",
  "content-security-policy": PORTAL_CSP,
  // The page is tiny and names the current assets: always ask for it again.
  "cache-control": "no-cache",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
};

/**
 * GET /portal and its assets. From the sources, the bundle is built on the first request, not at
 * start-up, so an API (or a test) that never serves the portal never pays for esbuild; a failed
 * build is retried. The compiled API has it built already (see buildPortal).
 */
export function portalRoutes(branding: PortalBranding = DEFAULT_BRANDING): Hono {
  let bundle: Promise<PortalBundle & { page: string }> | undefined;
  const load = () => {
    bundle ??= buildPortal(PORTAL_PATH).then(
      (built) => ({ ...built, page: brandedPage(built.html, branding) }),
      (error: unknown) => {
        bundle = undefined;
        throw error;
      },
    );
    return bundle;
  };

  return new Hono()
    .get(PORTAL_PATH, async (c) => c.body((await load()).page, 200, pageHeaders))
    .get(`${PORTAL_PATH}/`, (c) => c.redirect(PORTAL_PATH, 301))
    .get(`${PORTAL_PATH}/assets/:file`, async (c) => {
      const asset = (await load()).assets.get(c.req.param("file"));
      // Thrown: the API's error handler answers it in the error shape (resource_missing).
      if (!asset) throw new HTTPException(404, { message: `No such portal asset: ${c.req.param("file")}` });
      return c.body(asset.body, 200, {
        "content-type": asset.contentType,
        // The name carries a hash of the content: it never changes under that name.
        "cache-control": "public, max-age=31536000, immutable",
        "x-content-type-options": "nosniff",
      });
    });
}
