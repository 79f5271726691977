// The bench's own logic, without running a phase: the report's rendering, one phase's checks
// against its targets, the command line (a bad option is refused, --help exits 0), and the
// endpoints of --endpoint-auth, which must refuse a request without the credential.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Agent, request } from "undici";
import { afterAll, describe, expect, it } from "vitest";
import { runCleanup } from "../src/harness/cleanup.ts";
import { type EndpointAuth, startEndpoint } from "../src/harness/endpoint.ts";
import { DEFAULT_OUT, helpText, parseOptions, UsageError } from "../src/options.ts";
import type { Context } from "../src/phase.ts";
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
      endpointAuth: undefined,
      egressProxy: false,
      out: DEFAULT_OUT,
    });
    expect(DEFAULT_OUT).toMatch(/\/BENCHMARKS\.tmp\.md$/);
  });

  it("runs the phases --only names, in the order of a full run, printing the report only", () => {
    const argv = [
      "--only",
      "origin,lone",
      "--quick",
      "--profile",
      "--tracing",
      "--endpoint-auth",
      "mtls",
      "--egress-proxy",
    ];
    expect(parseOptions(argv, PHASES)).toEqual({
      help: false,
      only: ["lone", "origin"],
      quick: true,
      profile: true,
      tracing: true,
      endpointAuth: "mtls",
      egressProxy: true,
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
    expect(() => parseOptions(["--endpoint-auth", "digest"], PHASES)).toThrow(/expected one of basic, oauth2, mtls/);
  });

  it("lists every phase and option in the help", () => {
    const help = helpText(PHASES);
    for (const phase of PHASES) expect(help).toContain(`  ${phase.name} `);
    for (const option of ["--only", "--quick", "--profile", "--tracing", "--endpoint-auth", "--egress-proxy", "--out"])
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

describe("the endpoints of --endpoint-auth", () => {
  afterAll(() => runCleanup());
  const context = (endpointAuth: EndpointAuth) => ({ endpointAuth, egressProxy: true }) as Context;
  const post = (url: string, options: { authorization?: string; dispatcher?: Agent } = {}) => {
    const headers = options.authorization ? { authorization: options.authorization } : {};
    return request(url, { method: "POST", body: "{}", headers, dispatcher: options.dispatcher }).then(
      async (response) => {
        await response.body.dump();
        return response.statusCode;
      },
      (error: Error) => error.message,
    );
  };

  it("refuses a request without the credential, and takes one with it", async () => {
    const basic = await startEndpoint(context("basic"));
    const { username, password } = basic.subscription.auth as { username: string; password: string };
    const credential = `Basic ${Buffer.from(`${username}:${password}`).toString("base64")}`;
    expect(await post(`${basic.receiver.url}/lone`)).toBe(401);
    expect(await post(`${basic.receiver.url}/lone`, { authorization: `${credential}x` })).toBe(401);
    expect(await post(`${basic.receiver.url}/lone`, { authorization: credential })).toBe(200);
    expect(basic.workerEnv.EGRESS_PROXY_URL).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    const oauth2 = await startEndpoint(context("oauth2"));
    const auth = oauth2.subscription.auth as { token_url: string; client_id: string; client_secret: string };
    const client = `Basic ${Buffer.from(`${auth.client_id}:${auth.client_secret}`).toString("base64")}`;
    const token = await request(auth.token_url, {
      method: "POST",
      headers: { authorization: client, "content-type": "application/x-www-form-urlencoded" },
      body: "grant_type=client_credentials",
    }).then((response) => response.body.json() as Promise<{ access_token: string }>);
    expect(await post(`${oauth2.receiver.url}/lone`, { authorization: "Bearer tok_0" })).toBe(401);
    expect(await post(`${oauth2.receiver.url}/lone`, { authorization: `Bearer ${token.access_token}` })).toBe(200);

    const mtls = await startEndpoint(context("mtls"));
    const ca = readFileSync(mtls.workerEnv.NODE_EXTRA_CA_CERTS!, "utf8");
    const { certificate, private_key } = mtls.subscription.client_certificate as Record<string, string>;
    expect(mtls.receiver.url).toMatch(/^https:/);
    // Without a certificate the handshake fails: an error, no status.
    expect(await post(`${mtls.receiver.url}/lone`, { dispatcher: new Agent({ connect: { ca } }) })).toEqual(
      expect.any(String),
    );
    const withCertificate = new Agent({ connect: { ca, cert: certificate, key: private_key } });
    expect(await post(`${mtls.receiver.url}/lone`, { dispatcher: withCertificate })).toBe(200);
  });
});
