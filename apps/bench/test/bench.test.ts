// The bench's own logic, without running a phase: the report's rendering, one phase's checks
// against its targets, and the command line (a bad option is refused, --help exits 0).
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { DEFAULT_OUT, helpText, parseOptions, UsageError } from "../src/options.ts";
import { table } from "../src/phase.ts";
import { originPhase } from "../src/phases/origin.ts";
import { PHASES } from "../src/phases.ts";
import { renderReport, renderTable } from "../src/report.ts";

describe("the report", () => {
  it("renders a table under its title, columns padded, pipes escaped, missing cells empty", () => {
    const rendered = renderTable(table("Runs", [{ run: "1", "deliveries/s": "1,920" }, { run: "2 | 3" }]));
    expect(rendered.split("\n")).toEqual([
      "**Runs**",
      "",
      "| run    | deliveries/s |",
      "| ------ | ------------ |",
      "| 1      | 1,920        |",
      "| 2 \\| 3 |              |",
    ]);
  });

  it("puts every check in one table, a failed phase as a miss, then each phase's tables", () => {
    const report = renderReport("2 cores, Node 20", [
      {
        title: "Lone events",
        tables: [table("Latency", [{ rate: "500/s", p50: "4.20 ms" }])],
        checks: [
          { figure: "p50 at 500 events/s", measured: "4.20 ms", target: "<= 10 ms", met: true },
          { figure: "CPU per event", measured: "3.40 ms", target: "<= 1.5 ms", met: false },
        ],
      },
      { title: "Fan-out", tables: [], checks: [], error: "POST /v1/events answered 500" },
    ]);
    const lines = report.split("\n");
    expect(lines[0]).toBe("## Results");
    expect(lines).toContain("2 cores, Node 20");
    expect(report).toMatch(/\| Lone events +\| p50 at 500 events\/s +\| 4\.20 ms +\| <= 10 ms +\| yes +\|/);
    expect(report).toMatch(/\| Lone events +\| CPU per event +\| 3\.40 ms +\| <= 1\.5 ms +\| \*\*no\*\* \|/);
    expect(report).toMatch(/\| Fan-out +\| the phase ran to its end +\| failed: POST \/v1\/events answered 500 +\|/);
    expect(lines.indexOf("### Lone events")).toBeGreaterThan(lines.indexOf("**Targets**"));
    expect(lines.indexOf("**Latency**")).toBeGreaterThan(lines.indexOf("### Lone events"));
    expect(report).not.toMatch(/NaN|undefined/);
  });

  it("checks the origin phase's targets: about as fast on one origin, and the capped line in time and within its cap", () => {
    const run = (lastS: number, delivered = 10_000, peak = 5) => ({
      subscriptions: 10_000,
      delivered,
      duplicates: 0,
      medianS: lastS / 2,
      lastS,
      perTenSeconds: [delivered],
      peakRequests: peak,
      peakConnections: peak,
    });
    const capped = { ...run(1.9, 300), subscriptions: 300 };
    const met = originPhase.report({ distinct: run(4), same: run(5), capped }).checks.map((c) => c.met);
    expect(met).toEqual([true, true, true]);
    const starved = { distinct: run(4), same: run(120, 9_665), capped: { ...capped, lastS: 2.5, peakConnections: 6 } };
    const report = originPhase.report(starved);
    expect(report.checks.map((c) => c.met)).toEqual([false, false, false]);
    expect(report.checks[0]!.measured).toContain("gave up with 9,665 delivered");
  });
});

describe("the command line", () => {
  it("runs every phase and writes BENCHMARKS.tmp.md by default", () => {
    expect(parseOptions([], PHASES)).toEqual({
      help: false,
      only: undefined,
      quick: false,
      profile: false,
      tracing: false,
      out: DEFAULT_OUT,
    });
    expect(DEFAULT_OUT).toMatch(/\/BENCHMARKS\.tmp\.md$/);
  });

  it("runs the phases --only names, in the order of a full run, printing the report only", () => {
    const options = parseOptions(["--only", "origin,lone", "--quick", "--profile", "--tracing"], PHASES);
    expect(options).toEqual({
      help: false,
      only: ["lone", "origin"],
      quick: true,
      profile: true,
      tracing: true,
      out: undefined,
    });
    expect(parseOptions(["--only", "lone", "--out", "lone.md"], PHASES).out).toBe("lone.md");
  });

  it("refuses what it does not know, saying what it expected", () => {
    expect(() => parseOptions(["--only", "lone,speed"], PHASES)).toThrow(UsageError);
    expect(() => parseOptions(["--only", "speed"], PHASES)).toThrow(
      /no phase named speed; the phases are throughput, w1, lone/,
    );
    expect(() => parseOptions(["--fast"], PHASES)).toThrow(/Unknown option '--fast'/);
    expect(() => parseOptions(["lone"], PHASES)).toThrow(UsageError);
    expect(() => parseOptions(["--only"], PHASES)).toThrow(/argument missing/);
  });

  it("lists every phase and option in the help", () => {
    const help = helpText(PHASES);
    for (const phase of PHASES) expect(help).toContain(`  ${phase.name} `);
    for (const option of ["--only", "--quick", "--profile", "--tracing", "--out", "--help"])
      expect(help).toContain(option);
  });

  it("prints the help and exits 0, and exits 1 with a message on a bad option, touching no service", () => {
    const bench = (...args: string[]) =>
      spawnSync(process.execPath, ["--import", "tsx", "src/main.ts", ...args], {
        cwd: fileURLToPath(new URL("..", import.meta.url)),
        encoding: "utf8",
        env: { ...process.env, BENCH_ADMIN_DATABASE_URL: "postgresql://nobody@127.0.0.1:1/none" },
      });
    const help = bench("--help");
    expect(help.status).toBe(0);
    expect(help.stdout).toContain("Usage: npm run bench -- [options]");
    const bad = bench("--only", "speed");
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain("bench: --only speed: no phase named speed");
    expect(bad.stderr).toContain("npm run bench -- --help");
  });
});
