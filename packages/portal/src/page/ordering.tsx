import { useState } from "preact/hooks";
import { type Subscription, unwrap } from "./api.ts";
import { ErrorAlert, Notice } from "./components.tsx";
import { useAction, useClient } from "./hooks.ts";

type Ordering = Subscription["ordering"];

/** How the portal names each ordering (docs/api.md#ordered-delivery). */
export const orderingLabels: Record<Ordering, string> = {
  none: "As soon as possible",
  fifo: "In order, one at a time",
};

/**
 * An endpoint's delivery order (docs/portal.md#delivery-order): as soon as possible, or in the order
 * the events were published, one at a time. What each costs is said beside the choice.
 */
export function OrderingSection({
  subscription,
  onChange,
}: {
  subscription: Subscription;
  onChange: (subscription: Subscription) => void;
}) {
  const client = useClient();
  const [ordering, setOrdering] = useState<Ordering>(subscription.ordering);
  const [saved, setSaved] = useState<string | undefined>(undefined);
  const save = useAction(async () => {
    setSaved(undefined);
    const changed = await unwrap(
      client.PUT("/v1/subscriptions/{subscription_id}", {
        params: { path: { subscription_id: subscription.id } },
        body: { ordering },
      }),
    );
    onChange(changed);
    setSaved(
      changed.ordering === "fifo"
        ? "Saved: events published from now on are delivered in order, one at a time."
        : "Saved: deliveries go as soon as possible; those that waited for their turn go now.",
    );
  });
  return (
    <section aria-labelledby="ordering-title" class="panel">
      <h2 id="ordering-title">Delivery order</h2>
      <p class="help">
        In order, this endpoint gets one webhook at a time, in the order the events were published: each is sent only
        once the one before it was delivered or failed for good, so a failing webhook holds back the ones after it until
        it succeeds or its retries run out. A resend, a recovery and a test event go at once, outside the order.
      </p>
      <form
        class="form inline"
        onSubmit={(event) => {
          event.preventDefault();
          void save.run();
        }}
      >
        <div class="field">
          <label for="edit-ordering">Deliver</label>
          <select id="edit-ordering" value={ordering} onChange={(e) => setOrdering(e.currentTarget.value as Ordering)}>
            {(Object.keys(orderingLabels) as Ordering[]).map((value) => (
              <option key={value} value={value}>
                {orderingLabels[value]}
              </option>
            ))}
          </select>
        </div>
        <div class="actions">
          <button type="submit" disabled={save.busy || ordering === subscription.ordering}>
            Save order
          </button>
        </div>
      </form>
      <ErrorAlert error={save.error} />
      {saved && <Notice>{saved}</Notice>}
    </section>
  );
}
