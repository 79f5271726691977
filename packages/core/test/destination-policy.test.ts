import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  checkDestinationUrl,
  type DestinationPolicy,
  hostsFileLocalNames,
  ipLiteralHost,
  isPublicAddress,
  urlSpellingProblem,
} from "../src/destination-policy.ts";

const production: DestinationPolicy = { allowHttp: false, allowPrivateNetworks: false };
const development: DestinationPolicy = { allowHttp: true, allowPrivateNetworks: true };
const PRIVATE_REASON = "must not point to a private, loopback or link-local address";

/**
 * Every way of writing a non-public destination: `host` is how it appears in a URL, `address`
 * the IP that isPublicAddress sees (undefined for host names, which are checked by name).
 */
const refused: { name: string; host: string; address: string | undefined }[] = [
  { name: "IPv4 loopback", host: "127.0.0.1", address: "127.0.0.1" },
  { name: "IPv4 loopback, elsewhere in 127/8", host: "127.255.255.254", address: "127.255.255.254" },
  { name: "IPv4 loopback, short form", host: "127.1", address: "127.1" },
  { name: "IPv4 loopback, one decimal number", host: "2130706433", address: "2130706433" },
  { name: "IPv4 loopback, octal", host: "0177.0.0.1", address: "0177.0.0.1" },
  { name: "IPv4 loopback, hex short form", host: "0x7f.1", address: "0x7f.1" },
  { name: "IPv4 loopback, one hex number", host: "0x7f000001", address: "0x7f000001" },
  { name: "IPv4 loopback, trailing dot", host: "127.0.0.1.", address: undefined },
  { name: "unspecified 0.0.0.0", host: "0.0.0.0", address: "0.0.0.0" },
  { name: "unspecified as one number", host: "0", address: undefined },
  { name: "this-network 0/8", host: "0.1.2.3", address: "0.1.2.3" },
  { name: "private 10/8", host: "10.0.0.1", address: "10.0.0.1" },
  { name: "private 10/8, top", host: "10.255.255.255", address: "10.255.255.255" },
  { name: "private 172.16/12, bottom", host: "172.16.0.1", address: "172.16.0.1" },
  { name: "private 172.16/12, top", host: "172.31.255.255", address: "172.31.255.255" },
  { name: "private 192.168/16", host: "192.168.1.1", address: "192.168.1.1" },
  { name: "link-local metadata 169.254.169.254", host: "169.254.169.254", address: "169.254.169.254" },
  { name: "metadata as one decimal number", host: "2852039166", address: "2852039166" },
  { name: "CGNAT 100.64/10", host: "100.64.0.1", address: "100.64.0.1" },
  { name: "CGNAT 100.64/10, top", host: "100.127.255.254", address: "100.127.255.254" },
  { name: "Azure wireserver 168.63.129.16", host: "168.63.129.16", address: "168.63.129.16" },
  { name: "Azure wireserver, three-part form", host: "168.63.33040", address: "168.63.33040" },
  { name: "IPv4 multicast", host: "224.0.0.1", address: "224.0.0.1" },
  { name: "IPv4 multicast, top", host: "239.255.255.250", address: "239.255.255.250" },
  { name: "limited broadcast", host: "255.255.255.255", address: "255.255.255.255" },
  { name: "reserved 240/4", host: "240.0.0.1", address: "240.0.0.1" },
  { name: "documentation 192.0.2/24", host: "192.0.2.1", address: "192.0.2.1" },
  { name: "benchmarking 198.18/15", host: "198.18.0.1", address: "198.18.0.1" },
  { name: "IPv6 loopback", host: "[::1]", address: "::1" },
  { name: "IPv6 loopback, long form", host: "[0:0:0:0:0:0:0:1]", address: "0:0:0:0:0:0:0:1" },
  { name: "IPv6 unspecified", host: "[::]", address: "::" },
  { name: "IPv6 link-local", host: "[fe80::1]", address: "fe80::1" },
  { name: "IPv6 unique local fc00::/7", host: "[fc00::1]", address: "fc00::1" },
  { name: "AWS IPv6 metadata fd00:ec2::254", host: "[fd00:ec2::254]", address: "fd00:ec2::254" },
  { name: "IPv4-mapped loopback, dotted", host: "[::ffff:127.0.0.1]", address: "::ffff:127.0.0.1" },
  { name: "IPv4-mapped loopback, hex", host: "[::ffff:7f00:1]", address: "::ffff:7f00:1" },
  { name: "IPv4-mapped metadata", host: "[::ffff:169.254.169.254]", address: "::ffff:169.254.169.254" },
  { name: "IPv4-mapped public address", host: "[::ffff:8.8.8.8]", address: "::ffff:8.8.8.8" },
  { name: "NAT64 of loopback", host: "[64:ff9b::7f00:1]", address: "64:ff9b::7f00:1" },
  { name: "NAT64 of loopback, dotted", host: "[64:ff9b::127.0.0.1]", address: "64:ff9b::127.0.0.1" },
  { name: "local-use NAT64 of loopback", host: "[64:ff9b:1::7f00:1]", address: "64:ff9b:1::7f00:1" },
  { name: "6to4 of loopback", host: "[2002:7f00:1::]", address: "2002:7f00:1::" },
  { name: "Teredo", host: "[2001::1]", address: "2001::1" },
  { name: "IPv6 documentation 2001:db8::/32", host: "[2001:db8::1]", address: "2001:db8::1" },
  { name: "IPv6 multicast", host: "[ff02::1]", address: "ff02::1" },
  { name: "IPv6 multicast, global scope", host: "[ff0e::1]", address: "ff0e::1" },
  { name: "localhost", host: "localhost", address: undefined },
  { name: "LOCALHOST in capitals", host: "LOCALHOST", address: undefined },
  { name: "a subdomain of localhost", host: "foo.localhost", address: undefined },
  { name: "a deep subdomain of localhost", host: "a.b.localhost", address: undefined },
];

const allowed: { name: string; host: string; address: string | undefined }[] = [
  { name: "Google DNS", host: "8.8.8.8", address: "8.8.8.8" },
  { name: "Cloudflare DNS", host: "1.1.1.1", address: "1.1.1.1" },
  { name: "just above 172.16/12", host: "172.32.0.1", address: "172.32.0.1" },
  { name: "just below 172.16/12", host: "172.15.255.255", address: "172.15.255.255" },
  { name: "just above CGNAT", host: "100.128.0.1", address: "100.128.0.1" },
  { name: "next to the Azure address", host: "168.63.129.17", address: "168.63.129.17" },
  { name: "Cloudflare IPv6 DNS", host: "[2606:4700:4700::1111]", address: "2606:4700:4700::1111" },
  { name: "Google IPv6 DNS", host: "[2001:4860:4860::8888]", address: "2001:4860:4860::8888" },
  { name: "a host name", host: "example.com", address: undefined },
  { name: "a host name with a port", host: "example.com:8443", address: undefined },
  { name: "a name that merely contains localhost", host: "localhost.example.com", address: undefined },
  { name: "a name that ends in localhost without a dot", host: "mylocalhost", address: undefined },
];

describe("isPublicAddress", () => {
  it.each(refused.filter((row) => row.address !== undefined))("refuses $name ($address)", ({ address }) => {
    expect(isPublicAddress(address ?? "")).toBe(false);
  });

  it.each(allowed.filter((row) => row.address !== undefined))("accepts $name ($address)", ({ address }) => {
    expect(isPublicAddress(address ?? "")).toBe(true);
  });

  it.each([
    "",
    "example.com",
    "localhost",
    "256.0.0.1",
    "1.2.3.4.5",
    "::g",
    "[::1]",
    " 8.8.8.8",
    "8.8.8.8 ",
    "8.8.8.8/32",
  ])("refuses %j, which is not an IP address", (text) => {
    expect(isPublicAddress(text)).toBe(false);
  });

  it("refuses the IPv4-compatible form of loopback (::7f00:1)", () => {
    expect(isPublicAddress("::7f00:1")).toBe(false);
  });
});

describe("checkDestinationUrl with the production policy", () => {
  it.each(refused)("refuses $name (https://$host/)", ({ host }) => {
    expect(checkDestinationUrl(`https://${host}/hooks`, production)).toEqual({ ok: false, reason: PRIVATE_REASON });
  });

  it.each(refused)("refuses $name on a custom port", ({ host }) => {
    expect(checkDestinationUrl(`https://${host}:8443/`, production).ok).toBe(false);
  });

  it.each(allowed)("accepts $name (https://$host/)", ({ host }) => {
    const verdict = checkDestinationUrl(`https://${host}/hooks?x=1`, production);
    expect(verdict.ok).toBe(true);
    if (verdict.ok) expect(verdict.url.pathname).toBe("/hooks");
  });

  it("refuses plain http, even to a public address", () => {
    const httpsOnly = "must start with https:// (this deployment does not accept plain http://)";
    expect(checkDestinationUrl("http://example.com/hooks", production)).toEqual({ ok: false, reason: httpsOnly });
    expect(checkDestinationUrl("http://8.8.8.8/hooks", production)).toEqual({ ok: false, reason: httpsOnly });
  });

  it.each([
    "ftp://example.com/",
    "file:///etc/passwd",
    "gopher://example.com/",
    "ws://example.com/",
    "wss://example.com/",
    "javascript:alert(1)",
    "data:text/plain,hi",
    "mailto:a@example.com",
  ])("refuses the scheme of %j, saying which the deployment takes", (url) => {
    expect(checkDestinationUrl(url, production)).toEqual({ ok: false, reason: "must start with https://" });
    expect(checkDestinationUrl(url, development)).toEqual({
      ok: false,
      reason: "must start with https:// or http://",
    });
  });

  it.each([
    "",
    "not a url",
    "example.com/hooks",
    "/hooks",
    "//example.com/hooks",
    "https://",
    "https://exa mple.com/",
    "https://[::1/",
    "https://300.1.1.1.1/",
  ])("refuses the malformed %j", (url) => {
    expect(checkDestinationUrl(url, production)).toEqual({ ok: false, reason: "must be an absolute URL" });
  });

  it("returns the parsed URL when it accepts", () => {
    const verdict = checkDestinationUrl("https://Example.COM:8443/a/b?c=d#e", production);
    expect(verdict.ok).toBe(true);
    if (verdict.ok) {
      expect(verdict.url).toBeInstanceOf(URL);
      expect(verdict.url.hostname).toBe("example.com");
      expect(verdict.url.port).toBe("8443");
    }
  });

  it.each(["localhost.", "foo.localhost."])("refuses %j with a trailing dot", (host) => {
    expect(checkDestinationUrl(`https://${host}/hooks`, production).ok).toBe(false);
  });

  it.each(["localhost.localdomain", "LOCALHOST.LOCALDOMAIN.", "ip6-localhost", "ip6-loopback", "a.b.localhost"])(
    "refuses %j, a name of the local host",
    (host) => {
      expect(checkDestinationUrl(`https://${host}/hooks`, production)).toEqual({ ok: false, reason: PRIVATE_REASON });
      expect(checkDestinationUrl(`https://${host}/hooks`, development).ok).toBe(true);
    },
  );

  it("refuses every name this machine's /etc/hosts maps to a loopback address", () => {
    const names = hostsFileLocalNames(readFileSync("/etc/hosts", "utf8"));
    expect(names.size).toBeGreaterThan(0);
    for (const name of names) {
      expect(checkDestinationUrl(`https://${name}/hooks`, production), name).toEqual({
        ok: false,
        reason: PRIVATE_REASON,
      });
    }
  });
});

describe("hostsFileLocalNames", () => {
  it("takes the names of non-public addresses, and skips comments and public ones", () => {
    const text = [
      "# comment 127.0.0.1 commented",
      "127.0.0.1\tlocalhost  box.internal",
      "127.0.1.1 myhost.example myhost # the machine",
      "::1 ip6-localhost ip6-loopback",
      "10.0.0.5 db",
      "93.184.216.34 public.example",
      "not-an-address name",
      "",
    ].join("\n");
    expect([...hostsFileLocalNames(text)].sort()).toEqual([
      "box.internal",
      "db",
      "ip6-localhost",
      "ip6-loopback",
      "localhost",
      "myhost",
      "myhost.example",
    ]);
  });
});

describe("checkDestinationUrl and host names DNS cannot look up", () => {
  const reason = "must have a host name of at most 253 characters, each part between dots 1 to 63 characters long";
  const label63 = "a".repeat(63);
  const host253 = `${label63}.${label63}.${label63}.${"b".repeat(61)}`;

  it.each([`${"a".repeat(64)}.example.com`, `${host253}c`, `${host253}c.`, "a..example.com", ".example.com"])(
    "refuses %j, whatever the policy",
    (host) => {
      expect(checkDestinationUrl(`https://${host}/hooks`, production)).toEqual({ ok: false, reason });
      expect(checkDestinationUrl(`https://${host}/hooks`, development)).toEqual({ ok: false, reason });
    },
  );

  it.each([`${label63}.example.com`, host253, `${host253}.`, "example.com.", "8.8.8.8", "[2606:4700:4700::1111]"])(
    "accepts %j",
    (host) => {
      expect(checkDestinationUrl(`https://${host}/hooks`, production).ok).toBe(true);
    },
  );
});

describe("checkDestinationUrl with other policies", () => {
  it("allows loopback over http when both switches are on", () => {
    for (const url of [
      "http://127.0.0.1:4000/hooks",
      "http://localhost:4000/hooks",
      "http://[::1]:4000/",
      "http://10.0.0.5/",
      "http://169.254.169.254/",
    ]) {
      expect(checkDestinationUrl(url, development).ok).toBe(true);
    }
  });

  it("refuses http but allows private https when only private networks are allowed", () => {
    const policy = { allowHttp: false, allowPrivateNetworks: true };
    expect(checkDestinationUrl("http://127.0.0.1/", policy)).toEqual({
      ok: false,
      reason: "must start with https:// (this deployment does not accept plain http://)",
    });
    expect(checkDestinationUrl("https://127.0.0.1/", policy).ok).toBe(true);
  });

  it("allows public http but refuses private addresses when only http is allowed", () => {
    const policy = { allowHttp: true, allowPrivateNetworks: false };
    expect(checkDestinationUrl("http://example.com/", policy).ok).toBe(true);
    expect(checkDestinationUrl("http://8.8.8.8/", policy).ok).toBe(true);
    expect(checkDestinationUrl("http://127.0.0.1/", policy)).toEqual({ ok: false, reason: PRIVATE_REASON });
    expect(checkDestinationUrl("http://localhost/", policy)).toEqual({ ok: false, reason: PRIVATE_REASON });
  });
});

describe("urlSpellingProblem", () => {
  it.each([
    ["https://example.com/a b", "must not contain spaces or control characters"],
    [" https://example.com/", "must not contain spaces or control characters"],
    ["https://example.com/\n", "must not contain spaces or control characters"],
    ["https://example.com/\u0000", "must not contain spaces or control characters"],
    ["https://example.com\\@evil.com/", "must not contain a backslash (it would be read as a slash)"],
    ["https:example.com/hooks", "must start with https:// (or http:// where the deployment allows it)"],
    ["https:/example.com/hooks", "must start with https:// (or http:// where the deployment allows it)"],
    [
      "https://user:pass@example.com/",
      "must not contain credentials (user:password@); send them in the subscription's headers, such as Authorization",
    ],
    [
      "https://user@example.com/",
      "must not contain credentials (user:password@); send them in the subscription's headers, such as Authorization",
    ],
    ["https://example.com:0/", "must not use port 0"],
    [
      "https://@example.com/",
      "must not contain credentials (user:password@); send them in the subscription's headers, such as Authorization",
    ],
    [
      "https://hooks.example.net:4201#@example.com/",
      "must not have an @ in its fragment (it would read as the host, which it is not)",
    ],
    [
      "https://hooks.example.net/in#x@example.com",
      "must not have an @ in its fragment (it would read as the host, which it is not)",
    ],
    ["https://example.com:0443/", "must write its port without leading zeros"],
    ["https://example.com:08443/in", "must write its port without leading zeros"],
    ["https://[2001:db8::1]:00443/", "must write its port without leading zeros"],
    ["https://example.com:00/", "must write its port without leading zeros"],
  ])("refuses %j", (url, problem) => {
    // Each of these parses, so only this check tells the client what the url would really do.
    expect(checkDestinationUrl(url.trim(), development).ok).toBe(true);
    expect(urlSpellingProblem(url, new URL(url))).toBe(problem);
  });

  it.each([
    "https://example.com/hooks?a=b#c",
    "HTTPS://Example.COM:8443/a/%20b",
    "http://127.0.0.1:3000/x",
    "https://[2001:db8::1]/",
    "https://bücher.example/in",
    "https://example.com/@x",
    "https://example.com/?to=a@example.com",
    "https://example.com:443/",
    "https://[2001:db8::1]:8443/",
  ])("accepts %j", (url) => {
    expect(urlSpellingProblem(url, new URL(url))).toBeUndefined();
  });
});

describe("ipLiteralHost", () => {
  it.each([
    ["https://8.8.8.8/", "8.8.8.8"],
    ["https://2130706433/", "127.0.0.1"],
    ["https://0x7f.1/", "127.0.0.1"],
    ["https://[::1]:8443/", "::1"],
    ["https://[::ffff:127.0.0.1]/", "::ffff:7f00:1"],
  ])("gives the IP of %s without brackets", (url, host) => {
    expect(ipLiteralHost(new URL(url))).toBe(host);
  });

  it.each(["https://example.com/", "https://localhost/", "https://1.2.3.example/"])(
    "gives undefined for the host name in %s",
    (url) => {
      expect(ipLiteralHost(new URL(url))).toBeUndefined();
    },
  );
});
