import { existsSync } from "node:fs";
import { readFile, rm, writeFile } from "node:fs/promises";
import { builtinModules } from "node:module";
import { dirname, join, resolve } from "node:path";
import { buildPortal, PORTAL_PATH } from "@webhooks/portal";
import { GATE_SCRIPTS, loadScript } from "@webhooks/queue";
import { build, type Metafile, type Plugin } from "esbuild";

/**
 * The production build (docs/deployment.md#the-compiled-build). esbuild bundles each program with
 * the workspace packages it imports (`@webhooks/*`, TypeScript) into one ES module; everything
 * from node_modules stays an import, loaded at run time from the production dependencies. Those
 * packages read files of their own next to their code (Prisma's query compiler, BullMQ's Lua
 * scripts, Bull Board's and Swagger UI's pages), which bundling them would break.
 *
 * Each bundle sits in `apps/<app>/dist/`, as deep under the repository's root as the sources it
 * comes from (`packages/<package>/src/`), so a path that the code finds from its own place
 * (`prisma/migrations`, from packages/db/src/migrate.ts) is the same in the bundle.
 */

interface Program {
  /** Where it goes, from the root: `apps/<app>/dist/<name>.js`. */
  output: string;
  /** Its entry point, from the root. */
  source: string;
}

export const PROGRAMS: Program[] = [
  { output: "apps/api/dist/main.js", source: "apps/api/src/main.ts" },
  { output: "apps/api/dist/keys.js", source: "apps/api/src/keys-cli.ts" },
  { output: "apps/api/dist/migrate.js", source: "packages/db/src/migrate-cli.ts" },
  { output: "apps/worker/dist/main.js", source: "apps/worker/src/main.ts" },
];

const OUTPUT_DIRECTORIES = ["apps/api/dist", "apps/worker/dist"];

export interface BuiltFile {
  path: string;
  bytes: number;
}

/** Builds every program into `root`'s apps, replacing what an earlier build left there. */
export async function buildService(repositoryRoot: string): Promise<BuiltFile[]> {
  const root = resolve(repositoryRoot);
  await Promise.all(OUTPUT_DIRECTORIES.map((directory) => rm(join(root, directory), { recursive: true, force: true })));
  const portal = await prebuiltPortalPlugin(root);
  const gateScripts = prebuiltGateScriptsPlugin(root);
  const result = await build({
    absWorkingDir: root,
    entryPoints: PROGRAMS.map((program) => ({ in: program.source, out: program.output.replace(/\.js$/, ".bundle") })),
    outdir: ".",
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20.19",
    // Only the mappings: a stack trace needs the .ts file and line, not the source text.
    sourcemap: "linked",
    sourcesContent: false,
    metafile: true,
    // A CommonJS package the build bundles (see dependenciesStayImports) calls require() for what
    // stays external; an ES module has no require of its own, so each bundle makes one for its place.
    banner: {
      js: 'import { createRequire as __createRequire } from "node:module"; const require = __createRequire(import.meta.url);',
    },
    logLevel: "warning",
    plugins: [portal, gateScripts, dependenciesStayImports(root)],
  });
  await assertProductionDependencies(root, result.metafile);
  await Promise.all(PROGRAMS.map((program) => writeFile(join(root, program.output), launcher(program))));
  return Object.entries(result.metafile.outputs)
    .map(([path, output]) => ({ path, bytes: output.bytes }))
    .concat(PROGRAMS.map((program) => ({ path: program.output, bytes: Buffer.byteLength(launcher(program)) })))
    .sort((a, b) => a.path.localeCompare(b.path));
}

/**
 * `<name>.js` turns on source maps, then loads `<name>.bundle.js`: Node maps only the files it
 * loads after they are on, so the switch cannot live in the bundle itself. Stack traces then name
 * our .ts files and lines, whether or not `node` was given --enable-source-maps.
 */
function launcher(program: Program): string {
  const bundle = program.output.slice(program.output.lastIndexOf("/") + 1).replace(/\.js$/, ".bundle.js");
  return `// Written by the production build (packages/build): source maps on, then the program.
process.setSourceMapsEnabled(true);
await import("./${bundle}");
`;
}

/**
 * Bare imports of anything but our own workspace packages are left to Node to load from the
 * root's node_modules, the only one a deployment keeps. A package that npm installed under a
 * workspace's own node_modules (its version differs from the one at the root) would not be found
 * there, so that copy is bundled instead.
 */
function dependenciesStayImports(root: string): Plugin {
  return {
    name: "dependencies-stay-imports",
    setup(plugin) {
      plugin.onResolve({ filter: /^[^./]/ }, (args) => {
        if (args.path.startsWith("@webhooks/")) return undefined;
        const name = packageName(args.path);
        const installed = installedCopy(args.resolveDir, name, root);
        const atRoot = installed === undefined || installed === join(root, "node_modules", name);
        return atRoot ? { path: args.path, external: true } : undefined;
      });
    },
  };
}

/** `@scope/name` or `name` of an import such as `@scope/name/sub/path`. */
function packageName(path: string): string {
  const parts = path.split("/");
  return path.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]!;
}

/** The folder Node would load package `name` from, for a module in `from`; undefined if none. */
function installedCopy(from: string, name: string, root: string): string | undefined {
  for (let dir = from; dir.startsWith(root); dir = dirname(dir)) {
    const candidate = join(dir, "node_modules", name);
    if (existsSync(join(candidate, "package.json"))) return candidate;
    if (dir === root) break;
  }
  return undefined;
}

/**
 * The gate's Redis scripts, read now from their .lua files: the compiled programs get, in place of
 * packages/queue/src/gate/load-script.ts (which reads them next to itself), a module that holds
 * each script as it would have read it.
 */
function prebuiltGateScriptsPlugin(root: string): Plugin {
  const scripts = GATE_SCRIPTS.map((name) => `[${JSON.stringify(name)}, ${JSON.stringify(loadScript(name))}]`);
  const contents = `// The gate's scripts as the production build read them (packages/build/src/build.ts).
const scripts = new Map([${scripts.join(", ")}]);
export const GATE_SCRIPTS = ${JSON.stringify(GATE_SCRIPTS)};
export function loadScript(name) {
  const script = scripts.get(name);
  if (script === undefined) throw new Error(\`No gate script named \${name}\`);
  return script;
}
`;
  const source = join(root, "packages/queue/src/gate/load-script.ts");
  return {
    name: "prebuilt-gate-scripts",
    setup(plugin) {
      plugin.onLoad({ filter: /load-script\.ts$/ }, (args) =>
        args.path === source
          ? { contents, loader: "js", resolveDir: join(root, "packages/queue/src/gate") }
          : undefined,
      );
    },
  };
}

/**
 * The portal's page, bundled now rather than at the first request: the compiled API gets, in
 * place of packages/portal/src/bundle.ts (which runs esbuild), a module that returns the page
 * built here, its files inlined. esbuild is then a development dependency only.
 */
async function prebuiltPortalPlugin(root: string): Promise<Plugin> {
  const bundle = await buildPortal(PORTAL_PATH);
  const assets = [...bundle.assets].map(
    ([name, asset]) =>
      `[${JSON.stringify(name)}, { contentType: ${JSON.stringify(asset.contentType)}, body: new Uint8Array(Buffer.from(${JSON.stringify(Buffer.from(asset.body).toString("base64"))}, "base64")) }]`,
  );
  const contents = `// The portal's page as the production build made it (packages/build/src/build.ts).
const bundle = { html: ${JSON.stringify(bundle.html)}, assets: new Map([${assets.join(", ")}]) };
export async function buildPortal(basePath) {
  if (basePath !== ${JSON.stringify(PORTAL_PATH)}) throw new Error(\`The portal was built for ${PORTAL_PATH}, not \${basePath}\`);
  return bundle;
}
`;
  const source = join(root, "packages/portal/src/bundle.ts");
  return {
    name: "prebuilt-portal",
    setup(plugin) {
      plugin.onLoad({ filter: /[\\/]packages[\\/]portal[\\/]src[\\/]bundle\.ts$/ }, (args) =>
        args.path === source ? { contents, loader: "js" } : undefined,
      );
    },
  };
}

/**
 * Every package a bundle imports must be a dependency (not a devDependency) of the workspace
 * whose code imports it, and that workspace one of the app's dependencies in turn: after
 * `npm prune --omit=dev` nothing else is installed.
 */
async function assertProductionDependencies(root: string, metafile: Metafile): Promise<void> {
  const manifests = new Map<string, { name: string; dependencies?: Record<string, string> }>();
  const manifest = async (workspace: string) => {
    if (!manifests.has(workspace))
      manifests.set(workspace, JSON.parse(await readFile(join(root, workspace, "package.json"), "utf8")));
    return manifests.get(workspace)!;
  };
  const builtins = new Set(builtinModules);
  const problems: string[] = [];
  for (const [file, input] of Object.entries(metafile.inputs)) {
    const workspace = workspaceOf(file);
    for (const imported of input.imports) {
      if (!imported.external || imported.path.startsWith("node:")) continue;
      const name = packageName(imported.path);
      if (builtins.has(name)) continue;
      const declared = workspace ? (await manifest(workspace)).dependencies?.[name] : undefined;
      if (declared === undefined)
        problems.push(
          `${file} imports ${imported.path}, which is not in the dependencies of ${workspace ?? "its package"}`,
        );
    }
  }
  // The workspaces themselves: each bundled one must be a production dependency of an app's chain.
  for (const output of Object.values(metafile.outputs)) {
    if (!output.entryPoint) continue;
    const app = workspaceOf(output.entryPoint)!;
    const reachable = new Set<string>();
    const visit = async (workspace: string) => {
      const { name, dependencies = {} } = await manifest(workspace);
      if (reachable.has(name)) return;
      reachable.add(name);
      for (const dependency of Object.keys(dependencies))
        if (dependency.startsWith("@webhooks/")) await visit(`packages/${dependency.slice("@webhooks/".length)}`);
    };
    await visit(app);
    for (const file of Object.keys(output.inputs)) {
      const workspace = workspaceOf(file);
      if (!workspace) continue;
      const { name } = await manifest(workspace);
      if (!reachable.has(name))
        problems.push(`${output.entryPoint} bundles ${file}, but ${name} is not among the production dependencies`);
    }
  }
  // And the copy each bundle will load, the root's, must be one that npm keeps in production:
  // a devDependency's copy would be pruned from under it.
  const lock = JSON.parse(await readFile(join(root, "package-lock.json"), "utf8")) as {
    packages: Record<string, { dev?: boolean }>;
  };
  for (const [output, { imports }] of Object.entries(metafile.outputs)) {
    for (const imported of imports) {
      if (!imported.external || imported.path.startsWith("node:") || builtins.has(packageName(imported.path))) continue;
      const installed = `node_modules/${packageName(imported.path)}`;
      if (lock.packages[installed] === undefined || lock.packages[installed].dev)
        problems.push(`${output} loads ${imported.path} from ${installed}, which is not a production package`);
    }
  }
  if (problems.length > 0) {
    throw new Error(
      `The compiled build would need packages that npm prune --omit=dev removes:\n- ${[...new Set(problems)].join("\n- ")}`,
    );
  }
}

/** `apps/api` for `apps/api/src/main.ts`; undefined for a file outside the workspaces. */
function workspaceOf(file: string): string | undefined {
  return /^((?:apps|packages)\/[^/]+)\//.exec(file)?.[1];
}
