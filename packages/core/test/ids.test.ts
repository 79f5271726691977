import { decodeTime } from "ulid";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ID_BLOCK_SUFFIX_LENGTH, type IdKind, idPrefixes, isId, newId, newIdBlock } from "../src/ids.ts";

const kinds = Object.keys(idPrefixes) as IdKind[];
const crockfordUlid = /^[0-9A-HJKMNP-TV-Z]{26}$/;

afterEach(() => {
  vi.restoreAllMocks();
});

describe("newId", () => {
  it.each([
    ["subscription", "sub_"],
    ["event", "evt_"],
    ["delivery", "dlv_"],
    ["attempt", "att_"],
    ["apiKey", "key_"],
    ["secret", "sec_"],
    ["credentials", "cred_"],
    ["request", "req_"],
  ] as const)("gives a %s id the %s prefix and a ULID body", (kind, prefix) => {
    const id = newId(kind);
    expect(id.startsWith(prefix)).toBe(true);
    expect(id.slice(prefix.length)).toMatch(crockfordUlid);
    expect(isId(kind, id)).toBe(true);
  });

  it("has a test row for every kind in the catalog", () => {
    // Guards the table above: a new kind added to idPrefixes must get a prefix test too.
    expect([...kinds].sort()).toEqual([
      "apiKey",
      "attempt",
      "credentials",
      "delivery",
      "event",
      "request",
      "secret",
      "subscription",
    ]);
  });

  it("uses a distinct prefix for every kind", () => {
    const prefixes = Object.values(idPrefixes);
    expect(new Set(prefixes).size).toBe(prefixes.length);
  });

  it("keeps ids made in a tight loop on the real clock in creation order", () => {
    const ids = Array.from({ length: 5_000 }, () => newId("attempt"));
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });

  // The ULID factory is monotonic and shared by the module: once it has seen a time it never
  // goes back, so the mocked clocks below only ever move forwards, and stay far in the future.
  it("encodes the creation time in the ULID body", () => {
    const now = Date.UTC(2080, 10, 21, 23, 36, 50, 123);
    vi.spyOn(Date, "now").mockReturnValue(now);
    const id = newId("event");
    expect(decodeTime(id.slice("evt_".length))).toBe(now);
  });

  it("keeps ids made in the same millisecond in creation order", () => {
    // Pin the clock far in the future so every id below shares one millisecond.
    vi.spyOn(Date, "now").mockReturnValue(Date.UTC(2090, 0, 1));
    const ids = Array.from({ length: 2_000 }, () => newId("delivery"));
    expect(new Set(ids).size).toBe(ids.length);
    expect(new Set(ids.map((id) => id.slice(4, 14))).size).toBe(1); // one shared time part
    expect([...ids].sort()).toEqual(ids);
  });

  it("sorts later milliseconds after earlier ones", () => {
    const clock = vi.spyOn(Date, "now");
    clock.mockReturnValue(Date.UTC(2091, 0, 1, 0, 0, 0, 0));
    const first = newId("event");
    clock.mockReturnValue(Date.UTC(2091, 0, 1, 0, 0, 0, 1));
    const second = newId("event");
    expect(first < second).toBe(true);
  });

  it("stays in creation order when the clock steps backwards", () => {
    const clock = vi.spyOn(Date, "now");
    clock.mockReturnValue(Date.UTC(2092, 0, 1, 0, 0, 1));
    const first = newId("event");
    clock.mockReturnValue(Date.UTC(2092, 0, 1, 0, 0, 0));
    const second = newId("event");
    expect(first < second).toBe(true);
  });
});

describe("newIdBlock", () => {
  it("numbers well-formed ids that sort after the ids made before it and before those made after, in one millisecond", () => {
    vi.spyOn(Date, "now").mockReturnValue(Date.UTC(2093, 0, 1));
    const before = newId("delivery");
    const head = newIdBlock("delivery");
    const after = newId("delivery");
    const lowest = `${head}${"0".repeat(ID_BLOCK_SUFFIX_LENGTH)}`;
    const highest = `${head}${"Z".repeat(ID_BLOCK_SUFFIX_LENGTH)}`;
    for (const id of [lowest, `${head}00000Z`, highest]) expect(isId("delivery", id)).toBe(true);
    expect([after, highest, before, lowest].sort()).toEqual([before, lowest, highest, after]);
    // Two blocks in a row never share a head.
    const next = newIdBlock("delivery");
    expect(next > `${head}ZZZZZZ` && next > after).toBe(true);
  });
});

describe("isId", () => {
  const body = "01JD3ZKQ8W2N5XGVY7T4RBHM6P";

  it("accepts a well-formed id of the right kind", () => {
    expect(isId("subscription", `sub_${body}`)).toBe(true);
    expect(isId("delivery", `dlv_${body}`)).toBe(true);
  });

  it.each([
    ["another kind's prefix", "subscription", `evt_${body}`],
    ["no prefix", "subscription", body],
    ["an upper-case prefix", "subscription", `SUB_${body}`],
    ["a prefix without underscore", "subscription", `sub${body}`],
    ["a dash instead of underscore", "subscription", `sub-${body}`],
    ["a lower-case body", "subscription", `sub_${body.toLowerCase()}`],
    ["a body one character short", "subscription", `sub_${body.slice(1)}`],
    ["a body one character long", "subscription", `sub_${body}0`],
    ["a trailing NUL", "subscription", `sub_${body}\u0000`],
    ["a NUL inside the body", "subscription", `sub_${body.slice(0, 10)}\u0000${body.slice(11)}`],
    ["a trailing newline", "subscription", `sub_${body}\n`],
    ["leading whitespace", "subscription", ` sub_${body}`],
    ["the letter I (not Crockford base32)", "subscription", `sub_${body.slice(0, 25)}I`],
    ["the letter L", "subscription", `sub_${body.slice(0, 25)}L`],
    ["the letter O", "subscription", `sub_${body.slice(0, 25)}O`],
    ["the letter U", "subscription", `sub_${body.slice(0, 25)}U`],
    ["an empty string", "subscription", ""],
    ["a timestamp past the ULID range (first character above 7)", "subscription", `sub_8${body.slice(1)}`],
    ["only the prefix", "subscription", "sub_"],
    ["a UUID body", "event", "evt_0191f3a0-7c1e-7b8a-9c3d-2e4f5a6b7c8d"],
  ] as const)("rejects %s", (_case, kind, value) => {
    expect(isId(kind, value)).toBe(false);
  });

  it("accepts what newId makes and nothing of another kind", () => {
    for (const kind of kinds) {
      const id = newId(kind);
      for (const other of kinds) expect(isId(other, id)).toBe(other === kind);
    }
  });
});
