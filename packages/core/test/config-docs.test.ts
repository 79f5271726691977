import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { CONFIG_VARIABLES, loadConfig } from "../src/config.ts";

// docs/configuration.md documents every variable of the configuration schema with its default.
// This keeps the two from drifting apart.
const page = readFileSync(new URL("../../../docs/configuration.md", import.meta.url), "utf8");

/** The rows of the page's tables that document a variable: `| `NAME` | default | meaning |`. */
const rows = [...page.matchAll(/^\| `([A-Z][A-Z0-9_]*)` +\| ([^|]*)\|/gm)].map(([, name, defaultCell]) => ({
  name: name as string,
  defaultCell: (defaultCell as string).trim(),
}));

describe("docs/configuration.md", () => {
  it("documents every variable of the configuration schema", () => {
    const documented = new Set(rows.map((row) => row.name));
    expect(CONFIG_VARIABLES.filter((name) => !documented.has(name))).toEqual([]);
  });

  it("documents no variable the configuration does not read, and each once", () => {
    const known = new Set(CONFIG_VARIABLES);
    expect(rows.map((row) => row.name).filter((name) => !known.has(name))).toEqual([]);
    expect(rows.length).toBe(new Set(rows.map((row) => row.name)).size);
  });

  // A default written as a literal (`30d`) must be the schema's: setting the variable to it
  // changes nothing. Defaults written in words (_(none)_) are not literals and are skipped.
  const literalDefaults = rows.flatMap((row) => {
    const literal = /^`([^`]+)`/.exec(row.defaultCell)?.[1];
    return literal === undefined ? [] : [{ name: row.name, literal }];
  });

  // The rest are unset by default (an endpoint, a credential, a name), which no literal can show.
  it("checks the defaults of most variables", () => {
    expect(literalDefaults.length).toBeGreaterThanOrEqual(CONFIG_VARIABLES.length - 15);
  });

  it.each(literalDefaults)("shows the default of $name ($literal)", ({ name, literal }) => {
    expect(loadConfig({ [name]: literal })).toEqual(loadConfig({}));
  });
});
