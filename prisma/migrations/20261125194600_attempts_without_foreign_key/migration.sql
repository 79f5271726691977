-- Attempts keep delivery_id without a foreign key (see the DeliveryAttempt model in prisma/schema.prisma).

-- DropForeignKey
ALTER TABLE "delivery_attempts" DROP CONSTRAINT "delivery_attempts_delivery_id_fkey";
