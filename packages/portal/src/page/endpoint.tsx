import { useState } from "preact/hooks";
import { type Delivery, type Recovery, type Subscription, unwrap } from "./api.ts";
import { ClientCertificateSection } from "./client-certificate.tsx";
import { Badge, ErrorAlert, FieldError, fieldAria, Notice, Time, useFormProblem, ViewTitle } from "./components.tsx";
import { EndpointAuthSection } from "./endpoint-auth.tsx";
import { EventPicker } from "./event-picker.tsx";
import { FilterSection } from "./filter.tsx";
import {
  disabledReasonText,
  endpointStatus,
  formatEventTypes,
  formatHeaders,
  fromLocalInput,
  healthLabel,
  parseHeaders,
  timeZoneLabel,
  toLocalInput,
} from "./format.ts";
import { useAction, useClient, useLoad } from "./hooks.ts";
import { OrderingSection, orderingLabels } from "./ordering.tsx";
import { explain, type Problem, type Sent } from "./problems.ts";
import { deliveriesHref, deliveryHref, endpointsHref, navigate } from "./route.ts";
import { SigningSection } from "./signing-key.tsx";
import { EndpointStats } from "./stats.tsx";

/** One endpoint: its state and health, and everything its owner can do with it. */
export function EndpointView({ id }: { id: string }) {
  const client = useClient();
  const loaded = useLoad(
    () => unwrap(client.GET("/v1/subscriptions/{subscription_id}", { params: { path: { subscription_id: id } } })),
    id,
  );
  // The latest answer of an action replaces the loaded one, so the page shows what the API says now.
  const [updated, setUpdated] = useState<Subscription | undefined>(undefined);
  const subscription = updated?.id === id ? updated : loaded.data;

  if (loaded.error?.status === 404) {
    return (
      <>
        <ViewTitle>Endpoint not found</ViewTitle>
        <p>This endpoint does not exist or was deleted.</p>
        <p>
          <a href={endpointsHref}>Back to the endpoints</a>
        </p>
      </>
    );
  }
  if (!subscription) {
    return (
      <>
        <ViewTitle>Endpoint</ViewTitle>
        <ErrorAlert error={loaded.error} />
        {loaded.loading && <p>Loading…</p>}
      </>
    );
  }
  return <EndpointDetail key={subscription.id} subscription={subscription} onChange={setUpdated} />;
}

function EndpointDetail({
  subscription,
  onChange,
}: {
  subscription: Subscription;
  onChange: (subscription: Subscription) => void;
}) {
  const status = endpointStatus(subscription);
  const health = healthLabel(subscription);
  return (
    <>
      <p class="crumbs">
        <a href={endpointsHref}>Endpoints</a> /
      </p>
      <ViewTitle>
        <span class="mono break">{subscription.url}</span>
      </ViewTitle>
      {subscription.description && <p class="lead">{subscription.description}</p>}
      {subscription.disabled_reason && (
        <div class="alert" role="status">
          <p>{disabledReasonText[subscription.disabled_reason]}</p>
        </div>
      )}
      <section aria-labelledby="state-title" class="panel">
        <h2 id="state-title">State</h2>
        <dl class="facts">
          <dt>Status</dt>
          <dd>
            <Badge tone={status.tone}>{status.label}</Badge>
          </dd>
          <dt>Health</dt>
          <dd>
            <Badge tone={health.tone}>{health.label}</Badge>
            {subscription.health.retry_at && (
              <span class="small">
                {" "}
                until <Time iso={subscription.health.retry_at} />
              </span>
            )}
          </dd>
          <dt>Failures in a row</dt>
          <dd>{subscription.health.consecutive_failures}</dd>
          <dt>Last success</dt>
          <dd>
            <Time iso={subscription.health.last_success_at} />
          </dd>
          <dt>Last failure</dt>
          <dd>
            <Time iso={subscription.health.last_failure_at} />
          </dd>
          <dt>Event types</dt>
          <dd>{formatEventTypes(subscription.events)}</dd>
          <dt>Delivery order</dt>
          <dd>{orderingLabels[subscription.ordering]}</dd>
          <dt>Extra headers</dt>
          <dd>
            {Object.keys(subscription.headers).length > 0 ? Object.keys(subscription.headers).join(", ") : "None"}
          </dd>
          <dt>Created</dt>
          <dd>
            <Time iso={subscription.created_at} />
          </dd>
          <dt>ID</dt>
          <dd class="mono break">{subscription.id}</dd>
        </dl>
        <p>
          <a href={deliveriesHref({ subscription_id: subscription.id })}>See this endpoint's deliveries</a>
        </p>
      </section>
      <EndpointStats subscriptionId={subscription.id} />
      <PauseResume subscription={subscription} onChange={onChange} />
      <TestEvent subscription={subscription} />
      <EditEndpoint subscription={subscription} onChange={onChange} />
      <FilterSection subscription={subscription} onChange={onChange} />
      <OrderingSection subscription={subscription} onChange={onChange} />
      <EndpointAuthSection subscription={subscription} onChange={onChange} />
      <ClientCertificateSection subscription={subscription} onChange={onChange} />
      <SigningSection subscription={subscription} onChange={onChange} />
      <Recover subscription={subscription} />
      <DeleteEndpoint subscription={subscription} />
    </>
  );
}

type SectionProps = { subscription: Subscription; onChange: (subscription: Subscription) => void };

function PauseResume({ subscription, onChange }: SectionProps) {
  const client = useClient();
  const [done, setDone] = useState<string | undefined>(undefined);
  const toggle = useAction(async () => {
    const active = !subscription.active;
    const changed = await unwrap(
      client.PUT("/v1/subscriptions/{subscription_id}", {
        params: { path: { subscription_id: subscription.id } },
        body: { active },
      }),
    );
    onChange(changed);
    setDone(
      active
        ? "Resumed: new events are delivered to this endpoint again."
        : "Paused: new events are not delivered to this endpoint until you resume it.",
    );
  });
  return (
    <section aria-labelledby="pause-title" class="panel">
      <h2 id="pause-title">{subscription.active ? "Pause deliveries" : "Resume deliveries"}</h2>
      <p class="help">
        {subscription.active
          ? "While paused, this endpoint gets no new events; deliveries already under way go out as planned."
          : "Resuming sends new events to this endpoint again, and clears a stop made by the service."}
      </p>
      <button type="button" onClick={() => void toggle.run()} disabled={toggle.busy}>
        {subscription.active ? "Pause" : "Resume"}
      </button>
      <ErrorAlert error={toggle.error} />
      {done && <Notice>{done}</Notice>}
    </section>
  );
}

function TestEvent({ subscription }: { subscription: Subscription }) {
  const client = useClient();
  const [sent, setSent] = useState<Delivery | undefined>(undefined);
  const send = useAction(async () => {
    setSent(
      await unwrap(
        client.POST("/v1/subscriptions/{subscription_id}/test", {
          params: { path: { subscription_id: subscription.id } },
          body: {},
        }),
      ),
    );
  });
  return (
    <section aria-labelledby="test-title" class="panel">
      <h2 id="test-title">Send a test event</h2>
      <p class="help">
        Sends an example <code>webhook.test</code> event to this endpoint only, even while it is paused.
      </p>
      <button type="button" onClick={() => void send.run()} disabled={send.busy}>
        Send test event
      </button>
      <ErrorAlert error={send.error} />
      {sent && (
        <Notice>
          Test event sent. <a href={deliveryHref(sent.id)}>Follow its delivery</a>
        </Notice>
      )}
    </section>
  );
}

function EditEndpoint({ subscription, onChange }: SectionProps) {
  const client = useClient();
  const [url, setUrl] = useState(subscription.url);
  const [events, setEvents] = useState(subscription.events);
  const [headers, setHeaders] = useState(formatHeaders(subscription.headers));
  const [formProblem, setFormProblem] = useState<Problem | undefined>(undefined);
  const [sent, setSent] = useState<Sent>({});
  const [saved, setSaved] = useState(false);
  const save = useAction(async () => {
    setSaved(false);
    const parsed = parseHeaders(headers);
    if ("problem" in parsed) {
      setFormProblem({ field: "headers", message: parsed.problem });
      return;
    }
    setFormProblem(undefined);
    const body = { url: url.trim(), events, headers: parsed.headers };
    setSent(body);
    const changed = await unwrap(
      client.PUT("/v1/subscriptions/{subscription_id}", {
        params: { path: { subscription_id: subscription.id } },
        body,
      }),
    );
    onChange(changed);
    setSaved(true);
  });
  const problem = formProblem ?? (save.error ? explain(save.error, sent) : undefined);
  const unplaced = useFormProblem(
    problem,
    { url: "edit-url", events: "edit-events", headers: "edit-headers" },
    formProblem ?? save.error,
  );
  return (
    <section aria-labelledby="edit-title" class="panel">
      <h2 id="edit-title">Settings</h2>
      <form
        class="form"
        onSubmit={(event) => {
          event.preventDefault();
          void save.run();
        }}
      >
        <div class="field">
          <label for="edit-url">Endpoint URL</label>
          <input
            id="edit-url"
            type="url"
            required
            inputMode="url"
            value={url}
            onInput={(e) => setUrl(e.currentTarget.value)}
            {...fieldAria("edit-url", "url", problem)}
          />
          <FieldError id="edit-url" field="url" problem={problem} />
        </div>
        <EventPicker id="edit-events" events={events} onChange={setEvents} problem={problem} />
        <div class="field">
          <label for="edit-headers">Extra HTTP headers</label>
          <textarea
            id="edit-headers"
            rows={3}
            class="mono"
            value={headers}
            onInput={(e) => setHeaders(e.currentTarget.value)}
            {...fieldAria("edit-headers", "headers", problem, "edit-headers-help")}
          />
          <p id="edit-headers-help" class="help">
            One a line, <code>Name: value</code>. Leave empty for none.
          </p>
          <FieldError id="edit-headers" field="headers" problem={problem} />
        </div>
        <p class="help">Changes apply to deliveries created from now on.</p>
        <ErrorAlert problem={unplaced} />
        {saved && <Notice>Settings saved.</Notice>}
        <div class="actions">
          <button type="submit" class="primary" disabled={save.busy}>
            Save settings
          </button>
        </div>
      </form>
    </section>
  );
}

function Recover({ subscription }: { subscription: Subscription }) {
  const client = useClient();
  const [since, setSince] = useState(() => toLocalInput(new Date(Date.now() - 86_400_000)));
  const [until, setUntil] = useState("");
  const [formProblem, setFormProblem] = useState<Problem | undefined>(undefined);
  const [recovery, setRecovery] = useState<Recovery | undefined>(undefined);
  const recover = useAction(async () => {
    setRecovery(undefined);
    const sinceIso = fromLocalInput(since);
    const untilIso = until ? fromLocalInput(until) : undefined;
    if (!sinceIso || (until && !untilIso)) {
      setFormProblem({ field: sinceIso ? "until" : "since", message: "Enter a valid date and time." });
      return;
    }
    setFormProblem(undefined);
    setRecovery(
      await unwrap(
        client.POST("/v1/subscriptions/{subscription_id}/recover", {
          params: { path: { subscription_id: subscription.id } },
          body: { since: sinceIso, ...(untilIso ? { until: untilIso } : {}) },
        }),
      ),
    );
  });
  const problem = formProblem ?? (recover.error ? explain(recover.error) : undefined);
  const unplaced = useFormProblem(
    problem,
    { since: "recover-since", until: "recover-until" },
    formProblem ?? recover.error,
  );
  return (
    <section aria-labelledby="recover-title" class="panel">
      <h2 id="recover-title">Resend failed deliveries</h2>
      <p class="help">
        After an outage of your endpoint: sends again every failed delivery created in this time window. The times are
        in your time zone, {timeZoneLabel()}.
      </p>
      <form
        class="form inline"
        onSubmit={(event) => {
          event.preventDefault();
          void recover.run();
        }}
      >
        <div class="field">
          <label for="recover-since">From</label>
          <input
            id="recover-since"
            type="datetime-local"
            required
            value={since}
            onInput={(e) => setSince(e.currentTarget.value)}
            {...fieldAria("recover-since", "since", problem)}
          />
          <FieldError id="recover-since" field="since" problem={problem} />
        </div>
        <div class="field">
          <label for="recover-until">Until (optional; now if empty)</label>
          <input
            id="recover-until"
            type="datetime-local"
            value={until}
            onInput={(e) => setUntil(e.currentTarget.value)}
            {...fieldAria("recover-until", "until", problem)}
          />
          <FieldError id="recover-until" field="until" problem={problem} />
        </div>
        <div class="actions">
          <button type="submit" disabled={recover.busy}>
            Resend failed deliveries
          </button>
        </div>
      </form>
      <ErrorAlert problem={unplaced} />
      {recovery && (
        <Notice>
          {recovery.deliveries === 1 ? "1 failed delivery was" : `${recovery.deliveries} failed deliveries were`} queued
          again.
        </Notice>
      )}
    </section>
  );
}

function DeleteEndpoint({ subscription }: { subscription: Subscription }) {
  const client = useClient();
  const [confirming, setConfirming] = useState(false);
  const remove = useAction(async () => {
    await unwrap(
      client.DELETE("/v1/subscriptions/{subscription_id}", { params: { path: { subscription_id: subscription.id } } }),
    );
    navigate(endpointsHref);
  });
  return (
    <section aria-labelledby="delete-title" class="panel danger">
      <h2 id="delete-title">Delete this endpoint</h2>
      <p class="help">It gets no more webhooks. Its delivery log stays available.</p>
      {confirming ? (
        <fieldset class="actions confirm">
          <legend class="sr-only">Confirm deletion</legend>
          <button type="button" class="danger" onClick={() => void remove.run()} disabled={remove.busy}>
            Yes, delete it
          </button>
          <button type="button" onClick={() => setConfirming(false)}>
            Keep it
          </button>
        </fieldset>
      ) : (
        <button type="button" class="danger" onClick={() => setConfirming(true)}>
          Delete endpoint
        </button>
      )}
      <ErrorAlert error={remove.error} />
    </section>
  );
}
