-- DropIndex
DROP INDEX "deliveries_event_type_created_at_id_idx";
