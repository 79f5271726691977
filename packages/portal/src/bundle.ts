import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { BRANDING_SLOT } from "./branding.ts";

/** A file the portal serves under /portal/assets/, named by a hash of its content. */
export interface PortalAsset {
  body: Uint8Array<ArrayBuffer>;
  contentType: string;
}

export interface PortalBundle {
  html: string;
  /** The page's script and stylesheet, by file name. */
  assets: Map<string, PortalAsset>;
}

const ENTRY = fileURLToPath(new URL("./page/main.ts", import.meta.url));
const TSCONFIG = fileURLToPath(new URL("../tsconfig.json", import.meta.url));

const contentTypes: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
};

/**
 * Bundles the page (TSX, Preact, openapi-fetch and its stylesheet) in memory with esbuild: no build
 * step, no build output in the repository. Asset names carry a hash of their content, so a
 * browser may cache them for good and a new version is fetched under a new name.
 *
 * The production build calls this once and puts, in this module's place in the compiled API, one
 * that returns what it built (docs/deployment.md#the-compiled-build): there esbuild, a development
 * dependency, is never loaded.
 */
export async function buildPortal(basePath: string): Promise<PortalBundle> {
  const result = await build({
    entryPoints: [ENTRY],
    tsconfig: TSCONFIG,
    bundle: true,
    write: false,
    format: "esm",
    platform: "browser",
    target: "es2022",
    minify: true,
    legalComments: "none",
    outdir: "/portal-out",
    entryNames: "portal-[hash]",
    logLevel: "silent",
  });
  const assets = new Map<string, PortalAsset>();
  const tags: string[] = [];
  for (const file of result.outputFiles) {
    const name = file.path.slice(file.path.lastIndexOf("/") + 1);
    const extension = name.slice(name.lastIndexOf("."));
    const contentType = contentTypes[extension];
    if (!contentType) continue;
    // A copy with its own ArrayBuffer: esbuild's output views a larger shared one.
    assets.set(name, { body: new Uint8Array(file.contents), contentType });
    const href = `${basePath}/assets/${name}`;
    // Subresource integrity: the browser runs the file only if it is the one bundled here.
    const integrity = `sha384-${createHash("sha384").update(file.contents).digest("base64")}`;
    tags.push(
      extension === ".css"
        ? `<link rel="stylesheet" href="${href}" integrity="${integrity}">`
        : `<script type="module" src="${href}" integrity="${integrity}"></script>`,
    );
  }
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
${BRANDING_SLOT}
<link rel="icon" href="data:,">
${tags.sort().join("\n")}
</head>
<body>
<div id="app"><p class="loading">Loading…</p></div>
<noscript><p>This page needs JavaScript.</p></noscript>
</body>
</html>
`;
  return { html, assets };
}
