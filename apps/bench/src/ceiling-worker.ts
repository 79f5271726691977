// A child process of the ceiling phase (ceiling.ts): the least a delivery worker can do, with the
// same building blocks as apps/worker (BullMQ Worker, undici keep-alive pool, node-postgres).
// Per job: sign the body, POST it to the receiver, UPDATE one row by primary key. No Prisma, no
// lease, no attempt log, no validation, no batching of the UPDATEs. It takes jobs only once told
// to, so that its start-up (tsx compiling, connecting) is not timed.
import { createServer } from "node:http";
import { decodeSigningSecret, loadConfig, signWebhook } from "@webhooks/core";
import { type Job, Worker } from "bullmq";
import { Redis } from "ioredis";
import pg from "pg";
import { Agent, request } from "undici";

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};
const concurrency = Number(env("CEILING_CONCURRENCY"));
const receiverUrl = env("CEILING_RECEIVER_URL");
const key = decodeSigningSecret(env("CEILING_SECRET"));

// As many PostgreSQL connections as the product's worker process (DATABASE_POOL_SIZE, read by the
// same config parser, default 10), whatever the concurrency: with more, the ceiling would be
// measured with a resource the product does not get, and the ratio would not be like for like.
// Jobs beyond the pool's size wait for a connection, as the product's batched writes do.
const { databasePoolSize } = loadConfig(process.env);
const db = new pg.Pool({ connectionString: env("DATABASE_URL"), max: databasePoolSize });
db.on("error", (error) => console.error(`ceiling worker: idle connection lost: ${error.message}`));
const agent = new Agent({ keepAliveTimeout: 30_000 });
const connection = new Redis(env("REDIS_URL"), { maxRetriesPerRequest: null });

const worker = new Worker<{ row: number }>(
  "deliveries",
  async (job: Job<{ row: number }>) => {
    const body = `{"type":"invoice.paid","timestamp":"${new Date().toISOString()}","data":{"row":${job.data.row}}}`;
    // Signed as the product signs (core's signWebhook), so both pay the same for it.
    const signed = signWebhook({ secretKeys: [key], messageId: job.id!, timestamp: new Date(), body });
    const response = await request(receiverUrl, {
      method: "POST",
      dispatcher: agent,
      headers: { "content-type": "application/json", ...signed },
      body,
    });
    await response.body.text();
    await db.query(
      "UPDATE ceiling_rows SET status = $2, response_code = $3, attempts = attempts + 1, updated_at = now() WHERE id = $1",
      [job.data.row, response.statusCode < 300 ? "delivered" : "failed", response.statusCode],
    );
  },
  // The same lock settings as the product's worker (JOB_LOCK_DURATION default 30 s).
  {
    connection,
    prefix: env("QUEUE_PREFIX"),
    concurrency,
    lockDuration: 30_000,
    stalledInterval: 30_000,
    autorun: false,
  },
);
worker.on("error", (error) => console.error(`ceiling worker error: ${error.message}`));

const server = createServer((req, res) => {
  if (req.url === "/healthz") return void res.writeHead(200).end("ok");
  if (req.url === "/start" && req.method === "POST") {
    void worker.run();
    return void res.writeHead(202).end("started");
  }
  res.writeHead(404).end();
});
server.listen(Number(env("CEILING_PORT")), "127.0.0.1");

process.on("SIGTERM", () => {
  void (async () => {
    server.close();
    await worker.close();
    await db.end();
    await agent.close();
    connection.disconnect();
    process.exit(0);
  })();
});
