import { readFileSync } from "node:fs";

/** The gate's scripts, each a `.lua` file beside this module. */
export const GATE_SCRIPTS = ["acquire", "release", "nudge", "nudge_origin", "precheck", "pace"] as const;
export type GateScriptName = (typeof GATE_SCRIPTS)[number];

/**
 * Reads a gate script, with the files it includes (`--- @include "name"`, relative to the
 * including file, `.lua` implied) inlined in place of the directive, each file once per script.
 * The files are read relative to this module; the production build (packages/build) replaces this
 * module with one that holds every script as this function returns it.
 */
export function loadScript(name: GateScriptName): string {
  const included = new Set<string>();
  const expand = (file: URL): string =>
    readFileSync(file, "utf8").replace(/^--- @include "([^"]+)"[ \t]*$/gm, (_, path: string) => {
      const target = new URL(`${path}.lua`, file);
      if (included.has(target.href)) return "";
      included.add(target.href);
      return expand(target);
    });
  return expand(new URL(`./${name}.lua`, import.meta.url));
}
