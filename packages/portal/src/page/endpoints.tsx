import { useState } from "preact/hooks";
import { type SubscriptionWithSecret, unwrap } from "./api.ts";
import {
  Badge,
  ErrorAlert,
  FieldError,
  fieldAria,
  Pager,
  SecretOnce,
  Time,
  useFormProblem,
  ViewTitle,
} from "./components.tsx";
import { EventPicker } from "./event-picker.tsx";
import { endpointStatus, formatEventTypes, healthLabel, parseHeaders } from "./format.ts";
import { useAction, useClient, useLoad } from "./hooks.ts";
import { type Cursor, pageMoves } from "./paging.ts";
import { explain, type Problem, type Sent } from "./problems.ts";
import { endpointHref, newEndpointHref } from "./route.ts";
import { PublicKey, SchemeChoice, type SignatureScheme } from "./signing-key.tsx";

const PAGE_SIZE = 20;

/** The tenant's endpoints (subscriptions), a page at a time. */
export function EndpointsView() {
  const client = useClient();
  const [cursor, setCursor] = useState<Cursor>({});
  const page = useLoad(
    () => unwrap(client.GET("/v1/subscriptions", { params: { query: { limit: PAGE_SIZE, ...cursor } } })),
    JSON.stringify(cursor),
  );
  return (
    <>
      <div class="view-head">
        <ViewTitle>Endpoints</ViewTitle>
        <a class="button primary" href={newEndpointHref}>
          Add endpoint
        </a>
      </div>
      <p class="lead">
        An endpoint is a URL of yours that receives webhooks: we send it an HTTP POST for each event it subscribes to.
      </p>
      <ErrorAlert error={page.error} />
      {page.data && page.data.data.length === 0 && !cursor.starting_after && !cursor.ending_before && (
        <p class="empty">No endpoints yet. Add one to start receiving webhooks.</p>
      )}
      {page.data && page.data.data.length > 0 && (
        <table class="cards" aria-busy={page.loading}>
          <caption class="sr-only">Your endpoints</caption>
          <thead>
            <tr>
              <th scope="col">URL</th>
              <th scope="col">Events</th>
              <th scope="col">Status</th>
              <th scope="col">Health</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {page.data.data.map((subscription) => {
              const status = endpointStatus(subscription);
              const health = healthLabel(subscription);
              return (
                <tr key={subscription.id}>
                  <td data-label="URL">
                    <a class="mono break" href={endpointHref(subscription.id)}>
                      {subscription.url}
                    </a>
                    {subscription.description && <div class="small muted">{subscription.description}</div>}
                  </td>
                  <td data-label="Events">{formatEventTypes(subscription.events)}</td>
                  <td data-label="Status">
                    <Badge tone={status.tone}>{status.label}</Badge>
                  </td>
                  <td data-label="Health">
                    <Badge tone={health.tone}>{health.label}</Badge>
                  </td>
                  <td data-label="Created">
                    <Time iso={subscription.created_at} />
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      {page.data && <Pager label="Endpoint pages" {...pageMoves(page.data, cursor, setCursor)} />}
    </>
  );
}

/** The form that creates an endpoint, then shows its signing secret once. */
export function NewEndpointView() {
  const client = useClient();
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState<string[]>(["*"]);
  const [description, setDescription] = useState("");
  const [headers, setHeaders] = useState("");
  const [scheme, setScheme] = useState<SignatureScheme>("hmac-sha256");
  const [formProblem, setFormProblem] = useState<Problem | undefined>(undefined);
  const [sent, setSent] = useState<Sent>({});
  const [created, setCreated] = useState<SubscriptionWithSecret | undefined>(undefined);

  const create = useAction(async () => {
    const parsed = parseHeaders(headers);
    if ("problem" in parsed) {
      setFormProblem({ field: "headers", message: parsed.problem });
      return;
    }
    setFormProblem(undefined);
    const body = {
      url: url.trim(),
      events,
      headers: parsed.headers,
      signature_scheme: scheme,
      ...(description.trim() ? { description: description.trim() } : {}),
    };
    setSent(body);
    setCreated(await unwrap(client.POST("/v1/subscriptions", { body })));
  });
  const problem = formProblem ?? (create.error ? explain(create.error, sent) : undefined);
  const unplaced = useFormProblem(
    problem,
    { url: "new-url", events: "new-events", description: "new-description", headers: "new-headers" },
    formProblem ?? create.error,
  );

  if (created) {
    return (
      <>
        <ViewTitle>Endpoint created</ViewTitle>
        <p class="lead">
          We will send webhooks to <span class="mono break">{created.url}</span>.
        </p>
        {created.public_key ? (
          <section class="secret" aria-labelledby="public-key-title">
            <h2 id="public-key-title">Your public key</h2>
            <p>
              Webhooks to this endpoint are signed with Ed25519. The endpoint's page always shows this key: it is not a
              secret.
            </p>
            <PublicKey publicKey={created.public_key} />
          </section>
        ) : (
          <SecretOnce secret={created.secret ?? ""} title="Your signing secret" />
        )}
        <p>
          <a class="button primary" href={endpointHref(created.id)}>
            {created.public_key ? "Go to the endpoint" : "I have stored the secret: go to the endpoint"}
          </a>
        </p>
      </>
    );
  }

  return (
    <>
      <ViewTitle>Add an endpoint</ViewTitle>
      <form
        class="form"
        onSubmit={(event) => {
          event.preventDefault();
          void create.run();
        }}
      >
        <div class="field">
          <label for="new-url">Endpoint URL</label>
          <input
            id="new-url"
            type="url"
            required
            inputMode="url"
            placeholder="https://example.com/webhooks"
            value={url}
            onInput={(e) => setUrl(e.currentTarget.value)}
            {...fieldAria("new-url", "url", problem)}
          />
          <FieldError id="new-url" field="url" problem={problem} />
        </div>
        <EventPicker id="new-events" events={events} onChange={setEvents} problem={problem} />
        <div class="field">
          <label for="new-description">Description (optional)</label>
          <input
            id="new-description"
            maxLength={1024}
            value={description}
            onInput={(e) => setDescription(e.currentTarget.value)}
            {...fieldAria("new-description", "description", problem)}
          />
          <FieldError id="new-description" field="description" problem={problem} />
        </div>
        <div class="field">
          <label for="new-headers">Extra HTTP headers (optional)</label>
          <textarea
            id="new-headers"
            rows={3}
            class="mono"
            value={headers}
            onInput={(e) => setHeaders(e.currentTarget.value)}
            {...fieldAria("new-headers", "headers", problem, "new-headers-help")}
          />
          <p id="new-headers-help" class="help">
            One a line, such as <code>Authorization: Bearer 3c1f0e</code>. We send them with every webhook.
          </p>
          <FieldError id="new-headers" field="headers" problem={problem} />
        </div>
        <SchemeChoice scheme={scheme} onChange={setScheme} />
        <ErrorAlert problem={unplaced} />
        <div class="actions">
          <button type="submit" class="primary" disabled={create.busy}>
            {create.busy ? "Creating…" : "Create endpoint"}
          </button>
          <a class="button" href="#/endpoints">
            Cancel
          </a>
        </div>
      </form>
    </>
  );
}
