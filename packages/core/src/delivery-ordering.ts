/**
 * A subscription's ordering (docs/api.md#ordered-delivery): "none", its deliveries go as soon as
 * its limits allow; "fifo", one at a time, in the order of their events' publication, each only
 * once every earlier one is delivered or failed for good. Each delivery records, when it is
 * created, whether it is in that order; PostgreSQL keeps the order (packages/db/src/due-deliveries.ts).
 */
export const deliveryOrderings = ["none", "fifo"] as const;
export type DeliveryOrdering = (typeof deliveryOrderings)[number];
