import type { PrismaClientOrTransaction } from "./client.ts";

/**
 * Deliveries that should be in the queue: queued ones, and failed ones whose retry time has
 * passed (by `graceMs`, so a job that is about to fire is left alone), that no worker holds.
 * Paged by (next_attempt_at, id) so the reconciler can walk a large backlog in batches.
 */
export async function findDueDeliveries(
  ctx: { db: PrismaClientOrTransaction },
  input: { graceMs: number; limit: number; after?: { nextAttemptAt: Date; id: string } | undefined },
): Promise<{ id: string; nextAttemptAt: Date }[]> {
  const after = input.after;
  const rows = after
    ? await ctx.db.$queryRaw<{ id: string; next_attempt_at: Date }[]>`
        SELECT id, next_attempt_at FROM deliveries
        WHERE next_attempt_at <= now() - ${input.graceMs} * interval '1 millisecond'
          AND (leased_until IS NULL OR leased_until < now())
          AND (next_attempt_at, id) > (${after.nextAttemptAt}, ${after.id})
        ORDER BY next_attempt_at, id LIMIT ${input.limit}`
    : await ctx.db.$queryRaw<{ id: string; next_attempt_at: Date }[]>`
        SELECT id, next_attempt_at FROM deliveries
        WHERE next_attempt_at <= now() - ${input.graceMs} * interval '1 millisecond'
          AND (leased_until IS NULL OR leased_until < now())
        ORDER BY next_attempt_at, id LIMIT ${input.limit}`;
  return rows.map((row) => ({ id: row.id, nextAttemptAt: row.next_attempt_at }));
}
