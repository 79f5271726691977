/** The three states of a delivery (docs/api.md#delivery-states); their transitions are in delivery-lifecycle.ts. */
export const deliveryStatuses = ["queued", "delivered", "failed"] as const;
export type DeliveryStatus = (typeof deliveryStatuses)[number];
