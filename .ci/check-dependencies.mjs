// Each workspace declares what it imports and nothing else, and a dependency shared by several
// workspaces has one version everywhere. Run by .ci/run; exits 1 with the problems listed.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { builtinModules } from "node:module";
import { join } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const rootPackage = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
// The repository's own tooling (vitest, typescript, tsx, turbo) is the root's, for every workspace.
const rootTools = new Set(Object.keys(rootPackage.devDependencies ?? {}));
const builtins = new Set(builtinModules);

const ciScript = readFileSync(join(root, ".ci/run"), "utf8");

/** The commands a package installs (its `bin`), to tell a CLI used by a script from a stray dependency. */
function commandsOf(name) {
  try {
    const { bin } = JSON.parse(readFileSync(join(root, "node_modules", name, "package.json"), "utf8"));
    return typeof bin === "string" ? [name.replace(/^@[^/]+\//, "")] : Object.keys(bin ?? {});
  } catch {
    return [];
  }
}

/** Declared but not imported: type declarations, or a CLI that the package's scripts or CI run. */
const usedWithoutImport = (name, pkg) => {
  if (name.startsWith("@types/")) return true;
  const scripts = [...Object.values(pkg.scripts ?? {}), ciScript].join("\n");
  return commandsOf(name).some((command) => new RegExp(`(^|[\\s/])${command}(\\s|$)`, "m").test(scripts));
};

function sourceFiles(directory) {
  const files = [];
  for (const entry of readdirSync(directory)) {
    if (entry === "node_modules") continue;
    const path = join(directory, entry);
    if (statSync(path).isDirectory()) files.push(...sourceFiles(path));
    else if (/\.(m?ts|tsx|m?js|jsx)$/.test(entry)) files.push(path);
  }
  return files;
}

function importedPackages(file) {
  const text = readFileSync(file, "utf8");
  const names = new Set();
  // Import and export statements, dynamic imports, side-effect imports at the start of a line.
  for (const match of text.matchAll(
    /(?:^\s*(?:import|export)\b[^"';]*?\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)["']([^"']+)["']/gm,
  )) {
    const specifier = match[1];
    if (specifier.startsWith(".") || specifier.startsWith("/") || specifier.startsWith("node:")) continue;
    const parts = specifier.split("/");
    const name = specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
    if (!builtins.has(name)) names.add(name);
  }
  return names;
}

const problems = [];
const versions = new Map();
for (const group of ["apps", "packages"]) {
  for (const workspace of readdirSync(join(root, group))) {
    const directory = join(root, group, workspace);
    const pkg = JSON.parse(readFileSync(join(directory, "package.json"), "utf8"));
    const declared = { ...pkg.dependencies, ...pkg.devDependencies, ...pkg.peerDependencies };
    const imported = new Set();
    for (const sub of ["src", "test"]) {
      try {
        for (const file of sourceFiles(join(directory, sub)))
          for (const name of importedPackages(file)) imported.add(name);
      } catch {
        // No such folder.
      }
    }
    for (const name of imported) {
      if (name === pkg.name || declared[name] !== undefined || rootTools.has(name)) continue;
      problems.push(`${pkg.name} imports ${name} without declaring it`);
    }
    for (const name of Object.keys(declared)) {
      if (!imported.has(name) && !usedWithoutImport(name, pkg))
        problems.push(`${pkg.name} declares ${name} but does not import it`);
      if (!name.startsWith("@webhooks/"))
        versions.set(name, [...(versions.get(name) ?? []), `${pkg.name}@${declared[name]}`]);
    }
  }
}
for (const [name, uses] of versions) {
  const distinct = new Set(uses.map((use) => use.slice(use.lastIndexOf("@") + 1)));
  if (distinct.size > 1) problems.push(`${name} has several versions: ${uses.join(", ")}`);
}

if (problems.length > 0) {
  console.error(`Dependency problems:\n- ${problems.join("\n- ")}`);
  process.exit(1);
}
console.log("Dependencies: every workspace declares what it imports, and shared ones have one version.");
