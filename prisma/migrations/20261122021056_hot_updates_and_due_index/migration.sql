-- DropIndex
DROP INDEX "deliveries_next_attempt_at_idx";

-- CreateIndex
CREATE INDEX "deliveries_next_attempt_at_id_idx" ON "deliveries"("next_attempt_at", "id") WHERE (next_attempt_at IS NOT NULL);


-- Leave a fifth of each page free, so that the worker's claim on a delivery (which changes only
-- the unindexed lease columns) can be a HOT update: no new index entries, much less WAL.
-- (Prisma's schema cannot express storage parameters; its diff ignores them.)
ALTER TABLE "deliveries" SET (fillfactor = 80);
