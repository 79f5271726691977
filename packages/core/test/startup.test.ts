import { describe, expect, it } from "vitest";
import {
  connectionFailureReason,
  listenFailureMessage,
  postgresUnreachableMessage,
  redactUrl,
  redisUnreachableMessage,
} from "../src/startup.ts";

describe("redactUrl", () => {
  it.each([
    ["postgresql://app:hunter2@db.internal:5432/hooks", "postgresql://app:***@db.internal:5432/hooks"],
    ["redis://:hunter2@cache.internal:6379/0", "redis://:***@cache.internal:6379/0"],
    ["rediss://default:p%40ss@cache:6380", "rediss://default:***@cache:6380"],
  ])("hides the password in %s", (url, redacted) => {
    expect(redactUrl(url)).toBe(redacted);
    expect(redactUrl(url)).not.toContain("hunter2");
  });

  it.each(["postgresql://postgres@127.0.0.1:5432/webhooks", "redis://127.0.0.1:6379"])(
    "leaves %s without a password as it is",
    (url) => {
      expect(redactUrl(url)).toBe(url);
    },
  );

  it("does not echo what it cannot parse, which may hold a password", () => {
    expect(redactUrl("postgres://app:hunter2@db:99999/x")).toBe("(unparseable URL)");
    expect(redactUrl("")).toBe("(unparseable URL)");
  });
});

describe("start-up messages", () => {
  it("name the service, the redacted URL, the reason and the variable to change", () => {
    const postgres = postgresUnreachableMessage("postgresql://app:hunter2@db:5432/hooks", "ECONNREFUSED");
    expect(postgres).toContain("PostgreSQL");
    expect(postgres).toContain("postgresql://app:***@db:5432/hooks");
    expect(postgres).toContain("ECONNREFUSED");
    expect(postgres).toContain("DATABASE_URL");
    expect(postgres).not.toContain("hunter2");

    const redis = redisUnreachableMessage("redis://:hunter2@cache:6379", "ETIMEDOUT");
    expect(redis).toContain("Redis");
    expect(redis).toContain("redis://:***@cache:6379");
    expect(redis).toContain("ETIMEDOUT");
    expect(redis).toContain("REDIS_URL");
    expect(redis).not.toContain("hunter2");
  });
});

describe("connectionFailureReason", () => {
  function networkError(message: string, code: string): Error {
    return Object.assign(new Error(message), { code });
  }

  it("keeps a message that already names its code", () => {
    expect(connectionFailureReason(networkError("connect ECONNREFUSED 127.0.0.1:6379", "ECONNREFUSED"))).toBe(
      "connect ECONNREFUSED 127.0.0.1:6379",
    );
  });

  it("adds the code a message lacks, or stands in for an empty message", () => {
    expect(connectionFailureReason(networkError("connect timed out", "ETIMEDOUT"))).toBe("ETIMEDOUT connect timed out");
    expect(connectionFailureReason(networkError("", "ECONNRESET"))).toBe("ECONNRESET");
  });

  it("reads the causes inside an AggregateError with no message of its own (localhost: ::1 and 127.0.0.1)", () => {
    const both = new AggregateError([
      networkError("connect ECONNREFUSED ::1:6379", "ECONNREFUSED"),
      networkError("connect ECONNREFUSED 127.0.0.1:6379", "ECONNREFUSED"),
    ]);
    expect(connectionFailureReason(both)).toBe("connect ECONNREFUSED ::1:6379; connect ECONNREFUSED 127.0.0.1:6379");
  });

  it("describes what is not an Error at all", () => {
    expect(connectionFailureReason("socket hang up")).toBe("socket hang up");
  });
});

describe("listenFailureMessage", () => {
  const failure = (code: string) => Object.assign(new Error(`listen ${code}`), { code });

  it("names the port's variable for a port in use or one that needs privileges", () => {
    expect(listenFailureMessage("PORT", "0.0.0.0", 3000, failure("EADDRINUSE"))).toBe(
      "Cannot listen on 0.0.0.0:3000: port 3000 is already in use (EADDRINUSE). Stop what holds it or set PORT to a free port.",
    );
    expect(listenFailureMessage("WORKER_METRICS_PORT", "0.0.0.0", 80, failure("EACCES"))).toBe(
      "Cannot listen on 0.0.0.0:80: not permitted (EACCES; ports below 1024 need privileges). Set WORKER_METRICS_PORT to a port from 1024 up.",
    );
  });

  it("names HOST for an address the machine does not have, and both for anything else", () => {
    expect(listenFailureMessage("PORT", "10.9.9.9", 3000, failure("EADDRNOTAVAIL"))).toContain("Set HOST");
    expect(listenFailureMessage("PORT", "0.0.0.0", 3000, failure("EMFILE"))).toBe(
      "Cannot listen on 0.0.0.0:3000 (listen EMFILE). Check PORT and HOST.",
    );
  });
});
