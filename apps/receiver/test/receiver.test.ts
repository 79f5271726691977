import { spawn } from "node:child_process";
import { generateKeyPairSync, type KeyObject, randomBytes, sign } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// `npm run receiver` as docs/receiving.md#trying-it-locally runs it, from the repository root.
const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const SECRET = `whsec_${randomBytes(32).toString("base64")}`;

interface Receiver {
  url: string;
  output(): string;
  stop(): Promise<void>;
}

function npmReceiver(args: string[], env: Record<string, string> = {}) {
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => !name.toLowerCase().startsWith("npm_") && name !== "WEBHOOK_SECRET" && name !== "WEBHOOK_PUBLIC_KEY",
    ),
  );
  // A process group of its own, so that stopping it stops npm and the receiver under it.
  const child = spawn("npm", ["run", "receiver", "--", ...args], {
    cwd: ROOT,
    env: { ...inherited, ...env },
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | string>((resolve) =>
    child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")),
  );
  return { child, exited, output: () => output };
}

async function startReceiver(args: string[], env: Record<string, string> = {}): Promise<Receiver> {
  const { child, exited, output } = npmReceiver(["--port", "0", ...args], env);
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`receiver did not start:\n${output()}`)), 30_000);
    child.stdout.on("data", () => {
      const match = /Receiving webhooks at (http:\/\/127\.0\.0\.1:\d+\/)/.exec(output());
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`receiver exited (${code}):\n${output()}`));
    });
  });
  return {
    url,
    output,
    async stop() {
      process.kill(-child.pid!, "SIGTERM");
      await exited;
    },
  };
}

async function sendSigned(url: string, secret: string): Promise<number> {
  const id = `evt_${randomBytes(8).toString("hex")}`;
  const body = JSON.stringify({
    type: "invoice.paid",
    timestamp: new Date().toISOString(),
    data: { invoice: "in_42" },
  });
  const timestamp = new Date();
  const signature = new Webhook(secret).sign(id, timestamp, body);
  const response = await fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "webhook-id": id,
      "webhook-timestamp": String(Math.floor(timestamp.getTime() / 1000)),
      "webhook-signature": signature,
    },
    body,
  });
  await response.text();
  return response.status;
}

/** An ed25519 key pair: the private key to sign with, the public key as `whpk_` + base64 of its raw bytes. */
function ed25519KeyPair(): { privateKey: KeyObject; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const raw = publicKey.export({ format: "der", type: "spki" }).subarray(12);
  return { privateKey, publicKey: `whpk_${raw.toString("base64")}` };
}

/** Sends a webhook signed `v1a` (ed25519), as an ed25519 subscription's are. */
async function sendSignedV1a(url: string, privateKey: KeyObject): Promise<number> {
  const id = `evt_${randomBytes(8).toString("hex")}`;
  const body = JSON.stringify({ type: "invoice.paid", timestamp: new Date().toISOString(), data: {} });
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = sign(null, Buffer.from(`${id}.${timestamp}.${body}`), privateKey).toString("base64");
  const response = await fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "webhook-id": id,
      "webhook-timestamp": timestamp,
      "webhook-signature": `v1a,${signature}`,
    },
    body,
  });
  await response.text();
  return response.status;
}

let directory: string;
beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "receiver-test-"));
});
afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

/**
 * The receiver's output once it has `text`, or as it is after 5 s: the answer to a request can
 * arrive before the receiver's line about it is read from its stdout (through npm).
 */
async function outputOnceItHas(receiver: Receiver, text: string): Promise<string> {
  for (let waited = 0; !receiver.output().includes(text) && waited < 5_000; waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return receiver.output();
}

describe("npm run receiver", () => {
  it("verifies signatures with the secret from WEBHOOK_SECRET, which it never prints", async () => {
    const receiver = await startReceiver([], { WEBHOOK_SECRET: SECRET });
    try {
      expect(await sendSigned(receiver.url, SECRET)).toBe(200);
      expect(await sendSigned(receiver.url, `whsec_${randomBytes(32).toString("base64")}`)).toBe(400);
      const output = await outputOnceItHas(receiver, "SIGNATURE INVALID");
      expect(output).toContain("SIGNATURE INVALID");
      expect(output).toContain("signature valid");
    } finally {
      await receiver.stop();
    }
    expect(receiver.output()).not.toContain(SECRET.slice("whsec_".length));
  });

  it("reads the secret from --secret-file", async () => {
    const file = join(directory, "secret");
    await writeFile(file, `${SECRET}\n`, { mode: 0o600 });
    const receiver = await startReceiver(["--secret-file", file]);
    try {
      expect(await sendSigned(receiver.url, SECRET)).toBe(200);
      expect(await outputOnceItHas(receiver, "signature valid")).toContain("signature valid");
    } finally {
      await receiver.stop();
    }
    expect(receiver.output()).not.toContain(SECRET.slice("whsec_".length));
  });

  it("refuses --secret, which npm would print, and a secret given twice", async () => {
    const onCommandLine = npmReceiver(["--secret", "whsec_c2VjcmV0"]);
    expect(await onCommandLine.exited).toBe(1);
    expect(onCommandLine.output()).toContain("--secret is not accepted");
    expect(onCommandLine.output()).toContain("WEBHOOK_SECRET");

    const file = join(directory, "twice");
    await writeFile(file, SECRET);
    const twice = npmReceiver(["--secret-file", file], { WEBHOOK_SECRET: SECRET });
    expect(await twice.exited).toBe(1);
    expect(twice.output()).toContain("not both");
  });

  it("verifies v1a (ed25519) signatures with the public key from WEBHOOK_PUBLIC_KEY or --public-key-file", async () => {
    const keys = ed25519KeyPair();
    const fromEnv = await startReceiver([], { WEBHOOK_PUBLIC_KEY: keys.publicKey });
    try {
      expect(await sendSignedV1a(fromEnv.url, keys.privateKey)).toBe(200);
      expect(await sendSignedV1a(fromEnv.url, ed25519KeyPair().privateKey)).toBe(400);
      expect(await sendSigned(fromEnv.url, SECRET)).toBe(400);
      expect(await outputOnceItHas(fromEnv, "no v1a signature matches")).toContain("signature valid");
    } finally {
      await fromEnv.stop();
    }

    const file = join(directory, "public-key");
    await writeFile(file, `${keys.publicKey}\n`);
    const fromFile = await startReceiver(["--public-key-file", file]);
    try {
      expect(await sendSignedV1a(fromFile.url, keys.privateKey)).toBe(200);
    } finally {
      await fromFile.stop();
    }
  });

  it("refuses a malformed public key, and a secret and a public key together", async () => {
    const malformed = npmReceiver(["--public-key", "whsec_AAAA"]);
    expect(await malformed.exited).toBe(1);
    expect(malformed.output()).toContain("not an ed25519 public key");
    const both = npmReceiver(["--public-key", ed25519KeyPair().publicKey], { WEBHOOK_SECRET: SECRET });
    expect(await both.exited).toBe(1);
    expect(both.output()).toContain("not both");
  });

  it("refuses a secret that is not a Standard Webhooks secret without echoing it", async () => {
    const bad = npmReceiver([], { WEBHOOK_SECRET: "not-a-secret!!" });
    expect(await bad.exited).toBe(1);
    expect(bad.output()).toContain("not a Standard Webhooks secret");
    expect(bad.output()).not.toContain("not-a-secret!!");
  });
});

describe("the receiver's start-up failures", () => {
  it("a --port in use is one line naming --port", async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    const port = (holder.address() as { port: number }).port;
    try {
      // Run directly, not through npm, whose own lines about the failed script would follow.
      const child = spawn(process.execPath, ["--import", "tsx", "apps/receiver/src/main.ts", "--port", String(port)], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? "", WEBHOOK_SECRET: SECRET },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stderr = "";
      child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
      expect(code).toBe(1);
      const lines = stderr.trim().split("\n");
      expect(lines, stderr).toHaveLength(1);
      expect(lines[0]).toBe(
        `Cannot listen on 127.0.0.1:${port}: port ${port} is already in use (EADDRINUSE). Stop what holds it or choose another with --port.`,
      );
    } finally {
      await new Promise<void>((resolve) => holder.close(() => resolve()));
    }
  });
});
