// Comments and tests point at the docs section that states a rule (`// docs/api.md#retention`).
// This checks that every such reference in the code names a page of docs/ and, with an anchor,
// one of its headings, so that renaming a heading cannot leave the code pointing at nothing.
// Run by `npm run lint:links`; exits 1 with the broken references listed.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import GithubSlugger from "github-slugger";

const root = new URL("..", import.meta.url).pathname;

/** The anchors GitHub gives a page's headings (code blocks skipped), as remark-validate-links reads them. */
function anchorsOf(page) {
  const slugger = new GithubSlugger();
  const anchors = new Set();
  let inFence = false;
  for (const line of readFileSync(join(root, page), "utf8").split("\n")) {
    if (/^\s*(```|~~~)/.test(line)) inFence = !inFence;
    const heading = !inFence && /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) anchors.add(slugger.slug(heading[1].replace(/[`*_]|\[([^\]]*)\]\([^)]*\)/g, "$1")));
  }
  return anchors;
}

const files = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], { cwd: root })
  .toString()
  .split("\0")
  .filter((file) => /\.(ts|tsx|mjs|js|prisma|sql|lua|css)$/.test(file) && !file.includes("/generated/"))
  .filter((file) => existsSync(join(root, file)));

const anchorsByPage = new Map();
const problems = [];
for (const file of files) {
  readFileSync(join(root, file), "utf8")
    .split("\n")
    .forEach((line, index) => {
      for (const [reference, page, anchor] of line.matchAll(/\bdocs\/([a-z0-9-]+\.md)(?:#([a-z0-9-]+))?/g)) {
        const path = `docs/${page}`;
        if (!existsSync(join(root, path))) {
          problems.push(`${file}:${index + 1}: ${reference}: no such page`);
          continue;
        }
        if (anchor === undefined) continue;
        if (!anchorsByPage.has(path)) anchorsByPage.set(path, anchorsOf(path));
        if (!anchorsByPage.get(path).has(anchor)) problems.push(`${file}:${index + 1}: ${reference}: no such heading`);
      }
    });
}

if (problems.length > 0) {
  console.error(`References to docs/ that lead nowhere:\n${problems.join("\n")}`);
  process.exit(1);
}
