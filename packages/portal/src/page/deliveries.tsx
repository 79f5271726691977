import { useState } from "preact/hooks";
import { type DeliveryStatus, type Subscription, unwrap } from "./api.ts";
import { Badge, ErrorAlert, FieldError, fieldAria, Pager, Time, useFormProblem, ViewTitle } from "./components.tsx";
import { deliveryStatus, retriesSoon } from "./format.ts";
import { useClient, useLoad, usePolling } from "./hooks.ts";
import { type Cursor, cursorFrom, pageMoves } from "./paging.ts";
import { explain, type Problem } from "./problems.ts";
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

/** The filter form's inputs, by the API parameter each sets. */
const FILTER_INPUTS = {
  subscription_id: "filter-endpoint",
  status: "filter-status",
  event: "filter-event",
  response_code: "filter-code",
};

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

  // A filter the API refused is said by its field; anything else above the list.
  const problem = page.error ? explain(page.error) : undefined;
  const unplaced = useFormProblem(problem, FILTER_INPUTS, page.error);
  // The page of other filters, kept while a refresh fails, must not pass for these ones.
  const shown = page.error?.status === 400 ? undefined : page.data;
  const urls = new Map((endpoints.data?.data ?? []).map((subscription) => [subscription.id, subscription.url]));
  const go = (next: Cursor) => navigate(deliveriesHref({ ...filters, ...next }));

  return (
    <>
      <ViewTitle>Delivery log</ViewTitle>
      <p class="lead">Every webhook we sent you, newest first, with each attempt and your endpoint's answer.</p>
      <FilterForm key={query.toString()} filters={filters} endpoints={endpoints.data?.data ?? []} problem={problem} />
      <div class="toolbar">
        <button type="button" onClick={page.reload} disabled={page.loading}>
          Refresh
        </button>
        <span class="small muted" aria-live="polite">
          {page.loading ? "Loading…" : ""}
        </span>
      </div>
      <ErrorAlert problem={unplaced} />
      {shown && shown.data.length === 0 && <p class="empty">No deliveries match.</p>}
      {shown && shown.data.length > 0 && (
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
            {shown.data.map((delivery) => {
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
      {shown && <Pager label="Delivery log pages" {...pageMoves(shown, cursor, go)} />}
    </>
  );
}

function FilterForm({
  filters,
  endpoints,
  problem,
}: {
  filters: Filters;
  endpoints: Subscription[];
  /** Why the log could not be listed with these filters: by the field at fault, or above the list. */
  problem: Problem | undefined;
}) {
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
        <select
          id="filter-endpoint"
          value={subscriptionId}
          onChange={(e) => setSubscriptionId(e.currentTarget.value)}
          {...fieldAria("filter-endpoint", "subscription_id", problem)}
        >
          <option value="">All endpoints</option>
          {choices.map((endpoint) => (
            <option key={endpoint.id} value={endpoint.id}>
              {endpoint.url}
            </option>
          ))}
        </select>
        <FieldError id="filter-endpoint" field="subscription_id" problem={problem} />
      </div>
      <div class="field">
        <label for="filter-status">Status</label>
        <select
          id="filter-status"
          value={status}
          onChange={(e) => setStatus(e.currentTarget.value)}
          {...fieldAria("filter-status", "status", problem)}
        >
          {statuses.map((option) => (
            <option key={option.value} value={option.value}>
              {option.label}
            </option>
          ))}
        </select>
        <FieldError id="filter-status" field="status" problem={problem} />
      </div>
      <div class="field">
        <label for="filter-event">Event type</label>
        <input
          id="filter-event"
          placeholder="invoice.paid"
          value={event}
          onInput={(e) => setEvent(e.currentTarget.value)}
          {...fieldAria("filter-event", "event", problem)}
        />
        <FieldError id="filter-event" field="event" problem={problem} />
      </div>
      <div class="field">
        <label for="filter-code">Response code</label>
        <input
          id="filter-code"
          placeholder="500 or 5xx"
          value={responseCode}
          onInput={(e) => setResponseCode(e.currentTarget.value)}
          {...fieldAria("filter-code", "response_code", problem, "filter-code-help")}
        />
        <p id="filter-code-help" class="help">
          An exact code, or 2xx, 3xx, 4xx, 5xx.
        </p>
        <FieldError id="filter-code" field="response_code" problem={problem} />
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
