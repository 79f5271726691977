import type { LookupAddress } from "node:dns";
import { createLogger } from "@webhooks/core";
import { startReceiver, type TestReceiver } from "@webhooks/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HttpSender } from "../src/index.ts";
import type { Resolver } from "../src/safe-lookup.ts";

/**
 * Egress safety (docs/api.md#webhook-urls-and-egress-safety), table-driven: with production's
 * policy, every way of spelling a private, loopback, link-local, CGNAT, metadata, ULA or
 * IPv4-mapped address is refused before a byte is sent, whether it is written in the URL or is what
 * a host name resolves to when connecting.
 */
let rx: TestReceiver;
let port: string;

/** Pretends DNS answers `answers[host]`; unknown names do not resolve. */
function fakeDns(answers: Record<string, string[]>): Resolver {
  return (hostname, callback) => {
    const addresses = answers[hostname];
    if (!addresses)
      return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" }), []);
    callback(
      null,
      addresses.map((address): LookupAddress => ({ address, family: address.includes(":") ? 6 : 4 })),
    );
  };
}

const production = { allowHttp: false, allowPrivateNetworks: false };

beforeAll(async () => {
  rx = await startReceiver();
  port = new URL(rx.url).port;
});
afterAll(async () => {
  await rx.close();
});

async function send(sender: HttpSender, url: string, headers: Record<string, string> = {}) {
  return sender.send(url, headers, "{}");
}

describe("IP literals in the URL", () => {
  const sender = new HttpSender({
    timeoutMs: 1_000,
    policy: { allowHttp: true, allowPrivateNetworks: false },
    userAgent: "test",
  });
  afterAll(() => sender.close());

  it.each([
    ["loopback", "127.0.0.1"],
    ["loopback, short form", "127.1"],
    ["loopback, decimal", "2130706433"],
    ["loopback, octal", "0177.0.0.1"],
    ["loopback, hex", "0x7f.0.0.1"],
    ["loopback, trailing dot", "127.0.0.1."],
    ["this network", "0.0.0.0"],
    ["private 10/8", "10.1.2.3"],
    ["private 172.16/12", "172.20.0.1"],
    ["private 192.168/16", "192.168.0.10"],
    ["link-local / cloud metadata", "169.254.169.254"],
    ["CGNAT / Alibaba metadata", "100.100.100.200"],
    ["Azure wireserver", "168.63.129.16"],
    ["broadcast", "255.255.255.255"],
    ["multicast", "224.0.0.1"],
    ["IPv6 loopback", "[::1]"],
    ["IPv6 unspecified", "[::]"],
    ["IPv6 link-local", "[fe80::1]"],
    ["IPv6 ULA", "[fc00::1]"],
    ["AWS IPv6 metadata (ULA)", "[fd00:ec2::254]"],
    ["IPv4-mapped loopback", "[::ffff:127.0.0.1]"],
    ["IPv4-mapped, hex form", "[::ffff:7f00:1]"],
    ["IPv4-mapped private", "[::ffff:10.0.0.1]"],
    ["NAT64 of loopback", "[64:ff9b::7f00:1]"],
    ["6to4 of loopback", "[2002:7f00:1::]"],
  ])("refuses %s (%s)", async (_, host) => {
    const before = rx.received.length;
    const result = await send(sender, `http://${host}:${port}/x`);
    expect(result.error).toMatch(/^destination not allowed/);
    expect(result.responseCode).toBeNull();
    expect(rx.received.length).toBe(before);
  });
});

describe("host names, checked on the address resolved at connect time", () => {
  it.each([
    ["resolves to loopback", ["127.0.0.1"]],
    ["rebinds to a private address", ["10.0.0.7"]],
    ["resolves to the metadata service", ["169.254.169.254"]],
    ["resolves to an IPv4-mapped address", ["::ffff:127.0.0.1"]],
    ["resolves to IPv6 loopback", ["::1"]],
    ["resolves to a ULA", ["fd12:3456::1"]],
    ["resolves to several private addresses", ["10.0.0.1", "192.168.1.1", "::1"]],
  ])("refuses a name that %s, naming the addresses in the worker's log only", async (_, addresses) => {
    const logLines: Record<string, unknown>[] = [];
    const sender = new HttpSender({
      timeoutMs: 1_000,
      policy: { allowHttp: true, allowPrivateNetworks: false },
      userAgent: "test",
      resolve: fakeDns({ "hooks.example.com": addresses }),
      logger: createLogger({
        level: "info",
        name: "worker",
        destination: { write: (line: string) => void logLines.push(JSON.parse(line)) },
      }),
    });
    try {
      const result = await send(sender, `http://hooks.example.com:${port}/x`, { "webhook-id": "evt_test" });
      // The attempt's error is shown to the tenant (portal): it must not map our network for them.
      expect(result.error).toBe("destination not allowed: hooks.example.com does not resolve to a public address");
      expect(logLines).toEqual([
        expect.objectContaining({
          level: 40,
          eventId: "evt_test",
          host: "hooks.example.com",
          addresses,
          msg: "destination refused: its name resolves to no public address",
        }),
      ]);
    } finally {
      await sender.close();
    }
  });

  it("refuses the real localhost by its name, before any lookup", async () => {
    const sender = new HttpSender({
      timeoutMs: 1_000,
      policy: { allowHttp: true, allowPrivateNetworks: false },
      userAgent: "test",
    });
    try {
      const result = await send(sender, `http://localhost:${port}/x`);
      expect(result.error).toBe(
        "destination not allowed: url must not point to a private, loopback or link-local address",
      );
      expect(rx.received).toHaveLength(0);
    } finally {
      await sender.close();
    }
  });

  it("connects to the public addresses only, when an answer mixes public and private", async () => {
    const sender = new HttpSender({
      timeoutMs: 300,
      policy: { allowHttp: true, allowPrivateNetworks: false },
      userAgent: "test",
      // TEST-NET-3 is documentation space, so use a public one that simply is not reachable here.
      resolve: fakeDns({ "mixed.example.com": ["127.0.0.1", "93.184.215.14"] }),
    });
    try {
      const result = await send(sender, `http://mixed.example.com:${port}/x`);
      // Not refused: it tried the public address (unreachable from this sandbox) and never loopback.
      expect(result.error).not.toMatch(/destination not allowed/);
      expect(rx.received).toHaveLength(0);
    } finally {
      await sender.close();
    }
  });
});

describe("schemes", () => {
  it("refuses plain http in production, and non-http schemes always", async () => {
    const sender = new HttpSender({ timeoutMs: 1_000, policy: production, userAgent: "test" });
    try {
      expect((await send(sender, "http://example.com/x")).error).toBe(
        "destination not allowed: url must start with https:// (this deployment does not accept plain http://)",
      );
      expect((await send(sender, "ftp://example.com/x")).error).toMatch(/^destination not allowed/);
    } finally {
      await sender.close();
    }
  });

  it("allows loopback http when the policy allows it (development and tests)", async () => {
    const sender = new HttpSender({
      timeoutMs: 1_000,
      policy: { allowHttp: true, allowPrivateNetworks: true },
      userAgent: "test",
    });
    try {
      const result = await send(sender, `${rx.url}/ok`);
      expect(result).toMatchObject({ responseCode: 200, error: null });
    } finally {
      await sender.close();
    }
  });
});
