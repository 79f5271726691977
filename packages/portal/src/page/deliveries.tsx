import { useState } from "preact/hooks";
import { type DeliveryStatus, type Subscription, unwrap } from "./api.ts";
import { Badge, ErrorAlert, Pager, Time, ViewTitle } from "./components.tsx";
import { deliveryStatus, retriesSoon } from "./format.ts";
import { useClient, useLoad, usePolling } from "./hooks.ts";
import { type Cursor, cursorFrom, pageMoves } from "./paging.ts";
import { deliveriesHref, deliveryHref, endpointHref, navigate } from "./route.ts";

const PAGE_SIZE = 20;
/** Endpoints offered in the filter's list; more can still be filtered on from an endpoint's page. */
const ENDPOINT_CHOICES = 100;
const statuses: { value: DeliveryStatus | ""; label: string }[] = [
  { value: "", label: "Any status" },
  { value: "delivered", label: "Delivered" },
  { value: "failed", label: "Failed" },
  { value: "queued", label: "Queued" },
];

interface Filters {
  subscription_id?: string | undefined;
  status?: string | undefined;
  event?: string | undefined;
  response_code?: string | undefined;
}

const filtersFrom = (query: URLSearchParams): Filters => ({
  subscription_id: query.get("subscription_id") ?? undefined,
  status: query.get("status") ?? undefined,
  event: query.get("event") ?? undefined,
  response_code: query.get("response_code") ?? undefined,
});

/**
 * The delivery log: the API's filters, one page at a time by cursor (a tenant may have a million
 * deliveries; nothing here counts or loads them all). Filters and cursor live in the address, so
 * the back button walks back through pages and a filtered view can be bookmarked.
 */
export function DeliveriesView({ query }: { query: URLSearchParams }) {
  const client = useClient();
  const filters = filtersFrom(query);
  const cursor = cursorFrom(query);
  const endpoints = useLoad(
    () => unwrap(client.GET("/v1/subscriptions", { params: { query: { limit: ENDPOINT_CHOICES } } })),
    "endpoints",
  );
  const page = useLoad(
    () =>
      unwrap(
        client.GET("/v1/deliveries", {
          params: {
            query: { limit: PAGE_SIZE, ...filters, status: filters.status as DeliveryStatus | undefined, ...cursor },
          },
        }),
      ),
    query.toString(),
  );
  // The newest page refreshes itself while something on it is on its way: queued, or retried within
  // a minute (later retries are hours apart; Refresh is there for them).
  const onFirstPage = !cursor.starting_after && !cursor.ending_before;
  const inProgress = page.data?.data.some((delivery) => delivery.status === "queued" || retriesSoon(delivery)) ?? false;
  usePolling(onFirstPage && inProgress && !page.error, 2_000, page.reload);

  const urls = new Map((endpoints.data?.data ?? []).map((subscription) => [subscription.id, subscription.url]));
  const go = (next: Cursor) => navigate(deliveriesHref({ ...filters, ...next }));

  return (
    <>
      <ViewTitle>Delivery log</ViewTitle>
      <p class="lead">Every webhook we sent you, newest first, with each attempt and your endpoint's answer.</p>
      <FilterForm key={query.toString()} filters={filters} endpoints={endpoints.data?.data ?? []} />
      <div class="toolbar">
        <button type="button" onClick={page.reload} disabled={page.loading}>
          Refresh
        </button>
        <span class="small muted" aria-live="polite">
          {page.loading ? "Loading…" : ""}
        </span>
      </div>
      <ErrorAlert error={page.error} />
      {page.data && page.data.data.length === 0 && <p class="empty">No deliveries match.</p>}
      {page.data && page.data.data.length > 0 && (
        <table class="cards" aria-busy={page.loading}>
          <caption class="sr-only">Deliveries</caption>
          <thead>
            <tr>
              <th scope="col">Event</th>
              <th scope="col">Status</th>
              <th scope="col">Response</th>
              <th scope="col">Attempts</th>
              <th scope="col">Endpoint</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {page.data.data.map((delivery) => {
              const status = deliveryStatus(delivery);
              return (
                <tr key={delivery.id}>
                  <td data-label="Event">
                    <a href={deliveryHref(delivery.id)} aria-label={`${delivery.event} delivery ${delivery.id}`}>
                      {delivery.event}
                    </a>
                  </td>
                  <td data-label="Status">
                    <Badge tone={status.tone}>{status.label}</Badge>
                  </td>
                  <td data-label="Response">{delivery.response_code ?? <span class="muted">—</span>}</td>
                  <td data-label="Attempts">{delivery.attempts}</td>
                  <td data-label="Endpoint">
                    <a class="mono break" href={endpointHref(delivery.subscription_id)}>
                      {urls.get(delivery.subscription_id) ?? delivery.subscription_id}
                    </a>
                  </td>
                  <td data-label="Created">
                    <Time iso={delivery.created_at} />
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      {page.data && <Pager label="Delivery log pages" {...pageMoves(page.data, cursor, go)} />}
    </>
  );
}

function FilterForm({ filters, endpoints }: { filters: Filters; endpoints: Subscription[] }) {
  const [subscriptionId, setSubscriptionId] = useState(filters.subscription_id ?? "");
  const [status, setStatus] = useState(filters.status ?? "");
  const [event, setEvent] = useState(filters.event ?? "");
  const [responseCode, setResponseCode] = useState(filters.response_code ?? "");
  // An endpoint reached from its own page may be beyond the first hundred: still offer it.
  const choices =
    endpoints.some((endpoint) => endpoint.id === subscriptionId) || !subscriptionId
      ? endpoints
      : [...endpoints, { id: subscriptionId, url: subscriptionId }];
  return (
    <form
      class="filters"
      aria-label="Filter deliveries"
      onSubmit={(submitted) => {
        submitted.preventDefault();
        // New filters start again from the newest page.
        navigate(
          deliveriesHref({
            subscription_id: subscriptionId,
            status,
            event: event.trim(),
            response_code: responseCode.trim(),
          }),
        );
      }}
    >
      <div class="field">
        <label for="filter-endpoint">Endpoint</label>
        <select id="filter-endpoint" value={subscriptionId} onChange={(e) => setSubscriptionId(e.currentTarget.value)}>
          <option value="">All endpoints</option>
          {choices.map((endpoint) => (
            <option key={endpoint.id} value={endpoint.id}>
              {endpoint.url}
            </option>
          ))}
        </select>
      </div>
      <div class="field">
        <label for="filter-status">Status</label>
        <select id="filter-status" value={status} onChange={(e) => setStatus(e.currentTarget.value)}>
          {statuses.map((option) => (
            <option key={option.value} value={option.value}>
              {option.label}
            </option>
          ))}
        </select>
      </div>
      <div class="field">
        <label for="filter-event">Event type</label>
        <input
          id="filter-event"
          placeholder="invoice.paid"
          value={event}
          onInput={(e) => setEvent(e.currentTarget.value)}
        />
      </div>
      <div class="field">
        <label for="filter-code">Response code</label>
        <input
          id="filter-code"
          aria-describedby="filter-code-help"
          placeholder="500 or 5xx"
          value={responseCode}
          onInput={(e) => setResponseCode(e.currentTarget.value)}
        />
        <p id="filter-code-help" class="help">
          An exact code, or 2xx, 3xx, 4xx, 5xx.
        </p>
      </div>
      <div class="actions">
        <button type="submit" class="primary">
          Apply filters
        </button>
        <a class="button" href={deliveriesHref({})}>
          Clear
        </a>
      </div>
    </form>
  );
}
