import { Fragment } from "preact";
import { useCallback, useState } from "preact/hooks";
import { type DeliveryAttempt, unwrap } from "./api.ts";
import { Badge, CopyButton, ErrorAlert, Notice, Time, ViewTitle } from "./components.tsx";
import { deliveryStatus, retriesSoon } from "./format.ts";
import { useAction, useClient, useLoad, usePolling } from "./hooks.ts";
import { deliveriesHref, endpointHref } from "./route.ts";

/** Attempts shown; a delivery has 8 at most unless it is resent many times. */
const ATTEMPTS_SHOWN = 100;

/** One delivery, its attempts with each response, and a button to send it again. */
export function DeliveryView({ id }: { id: string }) {
  const client = useClient();
  const params = { params: { path: { delivery_id: id } } };
  const delivery = useLoad(() => unwrap(client.GET("/v1/deliveries/{delivery_id}", params)), id);
  const eventId = delivery.data?.event_id;
  const attempts = useLoad(
    () =>
      unwrap(
        client.GET("/v1/deliveries/{delivery_id}/attempts", {
          params: { path: { delivery_id: id }, query: { limit: ATTEMPTS_SHOWN } },
        }),
      ),
    id,
  );
  const [resent, setResent] = useState(false);
  const resend = useAction(async () => {
    await unwrap(client.POST("/v1/deliveries/{delivery_id}/retry", { ...params, body: {} }));
    setResent(true);
    delivery.reload();
    attempts.reload();
  });
  // While an attempt is on its way, follow it; a retry due within a minute too.
  const data = delivery.data;
  const retrySoon = data ? retriesSoon(data) : false;
  const reloadDelivery = delivery.reload;
  const reloadAttempts = attempts.reload;
  const reloadBoth = useCallback(() => {
    reloadDelivery();
    reloadAttempts();
  }, [reloadDelivery, reloadAttempts]);
  usePolling((data?.status === "queued" || retrySoon) && !delivery.error, 2_000, reloadBoth);

  if (delivery.error?.status === 404) {
    return (
      <>
        <ViewTitle>Delivery not found</ViewTitle>
        <p>This delivery does not exist, or is older than the log keeps.</p>
        <p>
          <a href={deliveriesHref({})}>Back to the delivery log</a>
        </p>
      </>
    );
  }
  if (!data) {
    return (
      <>
        <ViewTitle>Delivery</ViewTitle>
        <ErrorAlert error={delivery.error} />
        {delivery.loading && <p>Loading…</p>}
      </>
    );
  }
  const status = deliveryStatus(data);
  return (
    <>
      <p class="crumbs">
        <a href={deliveriesHref({})}>Delivery log</a> /
      </p>
      <ViewTitle>
        Delivery of <span class="mono">{data.event}</span>
      </ViewTitle>
      <section aria-labelledby="delivery-state" class="panel">
        <h2 id="delivery-state">State</h2>
        <dl class="facts">
          <dt>Status</dt>
          <dd>
            <Badge tone={status.tone}>{status.label}</Badge>
          </dd>
          {data.failure_reason === "payload_deleted" && (
            <>
              <dt>Why</dt>
              <dd>Ended without being sent: the event's payload was erased.</dd>
            </>
          )}
          <dt>Last response</dt>
          <dd>{data.response_code ?? "None"}</dd>
          <dt>Attempts</dt>
          <dd>{data.attempts}</dd>
          <dt>Next retry</dt>
          <dd>{data.next_retry_at ? <Time iso={data.next_retry_at} /> : "None planned"}</dd>
          <dt>Created</dt>
          <dd>
            <Time iso={data.created_at} />
          </dd>
          <dt>Endpoint</dt>
          <dd>
            <EndpointLink id={data.subscription_id} />
          </dd>
          <dt>Event ID</dt>
          <dd class="mono break">{data.event_id}</dd>
          <dt>Delivery ID</dt>
          <dd class="mono break">{data.id}</dd>
        </dl>
        <button type="button" onClick={() => void resend.run()} disabled={resend.busy}>
          Resend
        </button>
        <ErrorAlert error={resend.error} />
        {resent && (
          <Notice>Queued: the delivery will be sent again now, with the same content and signature scheme.</Notice>
        )}
      </section>
      {eventId && <Payload eventId={eventId} />}
      <section aria-labelledby="attempts-title">
        <h2 id="attempts-title">Attempts</h2>
        <ErrorAlert error={attempts.error} />
        {attempts.data && attempts.data.data.length === 0 && (
          <p class="empty">No attempt yet. Each attempt will show here with the headers it sent and the answer.</p>
        )}
        <ol class="attempts" reversed>
          {attempts.data?.data.map((attempt, index) => (
            <Attempt key={attempt.id} attempt={attempt} newest={index === 0} />
          ))}
        </ol>
        {attempts.data?.has_more && <p class="small">Only the newest {ATTEMPTS_SHOWN} attempts are shown.</p>}
      </section>
    </>
  );
}

/**
 * The body every attempt sent (docs/receiving.md#the-request): the event's type, when it was
 * published, and its data, as the receiver got them, formatted for reading.
 */
function Payload({ eventId }: { eventId: string }) {
  const client = useClient();
  const event = useLoad(
    () => unwrap(client.GET("/v1/events/{event_id}", { params: { path: { event_id: eventId } } })),
    eventId,
  );
  const erasedAt = event.data?.payload_deleted_at;
  const body =
    event.data && !erasedAt
      ? JSON.stringify({ type: event.data.type, timestamp: event.data.created_at, data: event.data.data }, null, 2)
      : undefined;
  return (
    <section aria-labelledby="payload-title" class="panel">
      <h2 id="payload-title">Payload</h2>
      <p class="help">
        The JSON body of every attempt: the event's type, when it was published (<code>timestamp</code>) and its{" "}
        <code>data</code>. Shown formatted; your endpoint received it on one line.
      </p>
      <ErrorAlert error={event.error} />
      {event.loading && !event.data && <p>Loading…</p>}
      {erasedAt && (
        <p class="empty">
          Erased on <Time iso={erasedAt} />: the payload is no longer kept, so this delivery cannot be sent again. Its
          state and attempts stay in the log.
        </p>
      )}
      {body && (
        <>
          <pre class="body payload mono">{body}</pre>
          <CopyButton text={body} label="Copy payload" />
        </>
      )}
    </section>
  );
}

/** The headers an attempt sent, as the API lists them: the signature and credentials elided. */
function RequestHeaders({ headers }: { headers: Record<string, string> }) {
  const entries = Object.entries(headers);
  const elided = entries.some(([, value]) => value.endsWith(ELIDED));
  return (
    <>
      <dl class="headers mono small">
        {entries.map(([name, value]) => (
          <Fragment key={name}>
            <dt>{name}</dt>
            <dd class={value.endsWith(ELIDED) ? "elided" : undefined}>{value}</dd>
          </Fragment>
        ))}
      </dl>
      {elided && (
        <p class="help">
          Values ending in … are hidden: the signature, and headers that hold credentials (such as Authorization), are
          never shown.
        </p>
      )}
    </>
  );
}

/** What stands for a hidden value in the API's request_headers. */
const ELIDED = "…";

function Attempt({ attempt, newest }: { attempt: DeliveryAttempt; newest: boolean }) {
  const ok = attempt.response_code !== null && attempt.response_code >= 200 && attempt.response_code < 300;
  const inFlight = attempt.duration_ms === null && attempt.error === null && attempt.response_code === null;
  return (
    <li class="attempt">
      <article aria-label={`Attempt ${attempt.number}`}>
        <h3>
          Attempt {attempt.number}:{" "}
          {inFlight ? (
            <Badge tone="muted">In progress</Badge>
          ) : attempt.response_code !== null ? (
            <Badge tone={ok ? "good" : "bad"}>HTTP {attempt.response_code}</Badge>
          ) : (
            <Badge tone="bad">No response</Badge>
          )}
        </h3>
        <dl class="facts">
          <dt>Started</dt>
          <dd>
            <Time iso={attempt.started_at} />
          </dd>
          <dt>Duration</dt>
          <dd>{attempt.duration_ms === null ? "—" : `${attempt.duration_ms} ms`}</dd>
          <dt>Sent to</dt>
          <dd class="mono break">{attempt.url}</dd>
          {attempt.error && (
            <>
              <dt>Error</dt>
              <dd>{attempt.error}</dd>
            </>
          )}
        </dl>
        <details open={newest}>
          <summary>Request headers</summary>
          <RequestHeaders headers={attempt.request_headers} />
        </details>
        {attempt.response_body !== null && (
          <details open>
            <summary>Response body (first 4 KiB)</summary>
            <pre class="body">{attempt.response_body === "" ? "(empty)" : attempt.response_body}</pre>
          </details>
        )}
      </article>
    </li>
  );
}

/** The endpoint's URL, which says more than its id; the id if the endpoint was deleted since. */
function EndpointLink({ id }: { id: string }) {
  const client = useClient();
  const endpoint = useLoad(
    () => unwrap(client.GET("/v1/subscriptions/{subscription_id}", { params: { path: { subscription_id: id } } })),
    id,
  );
  if (endpoint.error?.status === 404) return <span class="mono break">{id} (deleted)</span>;
  return (
    <a class="mono break" href={endpointHref(id)}>
      {endpoint.data?.url ?? id}
    </a>
  );
}
