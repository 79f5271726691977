-- Ordered delivery (docs/api.md#ordered-delivery). Both columns have a constant default, so
-- PostgreSQL adds them without rewriting either table. The new index starts empty (no delivery is
-- ordered yet), but building it reads the whole of deliveries once, and writes to it wait
-- meanwhile (docs/operations.md#upgrades).

-- AlterTable
ALTER TABLE "subscriptions" ADD COLUMN     "ordering" TEXT NOT NULL DEFAULT 'none';

-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "ordered" BOOLEAN NOT NULL DEFAULT false;

-- CreateIndex
CREATE INDEX "deliveries_line_idx" ON "deliveries"("subscription_id", "created_at", "event_id") WHERE (ordered AND (next_attempt_at IS NOT NULL));
