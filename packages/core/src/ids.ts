import { randomFillSync } from "node:crypto";
import { encodeTime, incrementBase32 } from "ulid";

/**
 * Every resource id is a short type prefix and a ULID (docs/api.md#ids). ULIDs sort by creation
 * time; the monotonic factory keeps ids made in the same millisecond in creation order too.
 */
export const idPrefixes = {
  subscription: "sub",
  event: "evt",
  delivery: "dlv",
  attempt: "att",
  apiKey: "key",
  secret: "sec",
  credentials: "cred",
  request: "req",
} as const;

export type IdKind = keyof typeof idPrefixes;

/**
 * Random bytes for ulid, drawn from a pool refilled 4 KiB at a time. ulid's default asks the OS
 * for one byte per character, which shows in CPU profiles of the publish and delivery paths.
 * A byte / 256 picks one of the 32 characters uniformly, as ulid's own source does.
 */
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;
function pooledRandom(): number {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  return pool[poolOffset++]! / 256;
}

/** The ULID alphabet (Crockford base32), in sort order. */
export const CROCKFORD_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/**
 * ulid's monotonic factory, written out so that newIdBlock can share its state: within one
 * millisecond (or while the clock steps backwards) each id is the previous one's random part + 1.
 */
let lastTime = 0;
let lastRandom = "";
function nextUlid(): string {
  const now = Date.now();
  if (now <= lastTime) {
    lastRandom = incrementBase32(lastRandom);
  } else {
    lastTime = now;
    lastRandom = "";
    for (let i = 0; i < 16; i++) lastRandom += CROCKFORD_ALPHABET[Math.floor(pooledRandom() * 32)];
  }
  return encodeTime(lastTime, 10) + lastRandom;
}

export function newId(kind: IdKind): string {
  return `${idPrefixes[kind]}_${nextUlid()}`;
}

/** The characters SQL appends to an id block's head: 6 Crockford characters, 2^30 ids. */
export const ID_BLOCK_SUFFIX_LENGTH = 6;

/**
 * The head of a block of ids that SQL numbers itself: every `head` + 6 Crockford characters
 * (`000000`, `000001`, ... `ZZZZZZ`) is a well-formed id of this kind, sorting after every id made
 * before this call and before every id made after it. A fan-out to thousands of subscriptions
 * numbers its deliveries in the INSERT this way instead of making and sending one id per row.
 */
export function newIdBlock(kind: IdKind): string {
  const body = nextUlid();
  // The next 10-character head is above every id made so far; the ids made next go above its
  // last id (head + ZZZZZZ + 1 carries into the head).
  const head = incrementBase32(body.slice(10, 20));
  lastRandom = head + "Z".repeat(ID_BLOCK_SUFFIX_LENGTH);
  return `${idPrefixes[kind]}_${body.slice(0, 10)}${head}`;
}

/** 26 Crockford base32 characters; the first is at most 7, or the timestamp would overflow. */
const ulidBody = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/;

/** True when `value` is a well-formed id of the given kind. */
export function isId(kind: IdKind, value: string): boolean {
  const prefix = `${idPrefixes[kind]}_`;
  return value.startsWith(prefix) && ulidBody.test(value.slice(prefix.length));
}
