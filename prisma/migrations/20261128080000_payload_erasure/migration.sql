-- Payload erasure (docs/api.md#erase-an-events-payload): an event's data becomes null and
-- payload_deleted_at records when; a delivery ended because of it says why in failure_reason.
-- Dropping NOT NULL and adding nullable columns without defaults rewrites no table.

-- AlterTable
ALTER TABLE "events" ALTER COLUMN "data" DROP NOT NULL,
ADD COLUMN     "payload_deleted_at" TIMESTAMPTZ(3);

-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "failure_reason" TEXT;

-- CreateTable
CREATE TABLE "pruner_cursors" (
    "name" TEXT NOT NULL,
    "after" TEXT NOT NULL,

    CONSTRAINT "pruner_cursors_pkey" PRIMARY KEY ("name")
);
