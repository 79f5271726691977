// A child process of the bare ceiling (ceiling.ts): the least a delivery worker can do, with
// apps/worker's building blocks (BullMQ, undici, node-postgres). Per job: sign the body, POST it,
// UPDATE one row by primary key; no Prisma, lease, attempt log, validation or batching.
import { createServer } from "node:http";
import { decodeSigningSecret, loadConfig, signWebhook } from "@webhooks/core";
import { Worker } from "bullmq";
import { Redis } from "ioredis";
import pg from "pg";
import { Agent, request } from "undici";

const env = (name: string): string => process.env[name] ?? "";
const key = decodeSigningSecret(env("CEILING_SECRET"));
// As many PostgreSQL connections as the product's worker (DATABASE_POOL_SIZE), whatever the
// concurrency: more would give the ceiling a resource the product does not get.
const db = new pg.Pool({ connectionString: env("DATABASE_URL"), max: loadConfig(process.env).databasePoolSize });
db.on("error", (error) => console.error(`ceiling worker: idle connection lost: ${error.message}`));
const agent = new Agent({ keepAliveTimeout: 30_000 });
const connection = new Redis(env("REDIS_URL"), { maxRetriesPerRequest: null });

const worker = new Worker<{ row: number }>(
  "deliveries",
  async (job) => {
    const body = `{"type":"invoice.paid","timestamp":"${new Date().toISOString()}","data":{"row":${job.data.row}}}`;
    // Signed as the product signs (core's signWebhook), so both pay the same for it.
    const headers = signWebhook({ secretKeys: [key], messageId: job.id!, timestamp: new Date(), body });
    const response = await request(env("CEILING_RECEIVER_URL"), {
      method: "POST",
      dispatcher: agent,
      headers: { "content-type": "application/json", ...headers },
      body,
    });
    await response.body.text();
    await db.query(
      "UPDATE ceiling_rows SET status = $2, response_code = $3, attempts = attempts + 1, updated_at = now() WHERE id = $1",
      [job.data.row, response.statusCode < 300 ? "delivered" : "failed", response.statusCode],
    );
  },
  // The product worker's lock settings (JOB_LOCK_DURATION's default).
  { connection, prefix: env("QUEUE_PREFIX"), concurrency: Number(env("CEILING_CONCURRENCY")), lockDuration: 30_000 },
);
worker.on("error", (error) => console.error(`ceiling worker error: ${error.message}`));

const server = createServer((_req, res) => void res.writeHead(200).end("ok"));
server.listen(Number(env("PORT")), "127.0.0.1");
process.on("SIGTERM", async () => {
  server.close();
  await worker.close();
  await Promise.all([db.end(), agent.close()]);
  connection.disconnect();
  process.exit(0);
});
