-- CreateIndex
CREATE INDEX "deliveries_event_id_idx" ON "deliveries"("event_id");
