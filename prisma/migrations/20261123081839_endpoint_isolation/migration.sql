-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "attempt_open" BOOLEAN NOT NULL DEFAULT false;

-- AlterTable
ALTER TABLE "delivery_attempts" ALTER COLUMN "duration_ms" DROP NOT NULL;

-- AlterTable
ALTER TABLE "subscriptions" ADD COLUMN     "circuit_opened_at" TIMESTAMPTZ(3),
ADD COLUMN     "consecutive_failures" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "disabled_reason" TEXT,
ADD COLUMN     "failing_since" TIMESTAMPTZ(3),
ADD COLUMN     "held_until" TIMESTAMPTZ(3),
ADD COLUMN     "last_failure_at" TIMESTAMPTZ(3),
ADD COLUMN     "last_success_at" TIMESTAMPTZ(3),
ADD COLUMN     "max_in_flight" INTEGER NOT NULL DEFAULT 10,
ADD COLUMN     "rate_limit" INTEGER;
