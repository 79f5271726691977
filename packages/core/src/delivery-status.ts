/** The three states of spec §3.1; their transitions are in contract §5. */
export const deliveryStatuses = ["queued", "delivered", "failed"] as const;
export type DeliveryStatus = (typeof deliveryStatuses)[number];
