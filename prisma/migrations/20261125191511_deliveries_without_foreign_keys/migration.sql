-- Deliveries keep subscription_id, event_id and secret_id without foreign keys: the row-by-row
-- checks were ~40% of a fan-out's insert (see the Delivery model in prisma/schema.prisma).

-- DropForeignKey
ALTER TABLE "deliveries" DROP CONSTRAINT "deliveries_event_id_fkey";

-- DropForeignKey
ALTER TABLE "deliveries" DROP CONSTRAINT "deliveries_secret_id_fkey";

-- DropForeignKey
ALTER TABLE "deliveries" DROP CONSTRAINT "deliveries_subscription_id_fkey";
