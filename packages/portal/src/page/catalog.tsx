import { useState } from "preact/hooks";
import { type EventType, type PortalClient, unwrap } from "./api.ts";
import { Badge, CopyButton, ErrorAlert, ViewTitle } from "./components.tsx";
import { type Loaded, useClient, useLoad } from "./hooks.ts";
import { eventTypeHref, eventTypesHref, newEndpointHref } from "./route.ts";
import { type SchemaField, schemaFields } from "./schema-fields.ts";

/** Types loaded at most: a catalog is a list of what a platform sends, tens or hundreds of names. */
const MAX_CATALOG = 1000;
const PAGE = 100;

/** The whole catalog, by name (docs/api.md#event-types): archived types are not offered. */
export async function loadCatalog(client: PortalClient): Promise<EventType[]> {
  const types: EventType[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await unwrap(
      client.GET("/v1/event-types", {
        params: { query: { limit: PAGE, ...(after === undefined ? {} : { starting_after: after }) } },
      }),
    );
    types.push(...page.data);
    after = page.data.at(-1)?.name;
    if (!page.has_more || after === undefined || types.length >= MAX_CATALOG) return types;
  }
}

export function useCatalog(): Loaded<EventType[]> {
  const client = useClient();
  return useLoad(() => loadCatalog(client), "catalog");
}

/** The event types the platform sends: what each means, its fields and an example. */
export function EventTypesView() {
  const catalog = useCatalog();
  const [search, setSearch] = useState("");
  const types = catalog.data ?? [];
  const shown = matching(types, search);
  return (
    <>
      <ViewTitle>Event types</ViewTitle>
      <p class="lead">
        What we can send to your endpoints. Open one to see what it means, the fields of its payload and an example.
      </p>
      <ErrorAlert error={catalog.error} />
      {catalog.loading && !catalog.data && <p>Loading…</p>}
      {catalog.data && types.length === 0 && (
        <p class="empty">No event types are described here yet. Your endpoints can still receive every event.</p>
      )}
      {types.length > 8 && (
        <div class="field search">
          <label for="catalog-search">Find an event type</label>
          <input
            id="catalog-search"
            type="search"
            value={search}
            onInput={(event) => setSearch(event.currentTarget.value)}
          />
        </div>
      )}
      {types.length > 0 && (
        <ul class="catalog">
          {shown.map((type) => (
            <li key={type.name}>
              <a class="mono" href={eventTypeHref(type.name)}>
                {type.name}
              </a>
              {type.deprecated && (
                <>
                  {" "}
                  <Badge tone="warn">Deprecated</Badge>
                </>
              )}
              {type.description && <p class="small muted">{type.description}</p>}
            </li>
          ))}
        </ul>
      )}
      {types.length > 0 && shown.length === 0 && <p class="empty">No event type matches “{search}”.</p>}
    </>
  );
}

/** The types whose name or description has every word of `search` in it. */
export function matching(types: EventType[], search: string): EventType[] {
  const words = search.toLowerCase().split(/\s+/).filter(Boolean);
  return types.filter((type) => {
    const text = `${type.name} ${type.description}`.toLowerCase();
    return words.every((word) => text.includes(word));
  });
}

/** One event type: its description, the fields of its payload (from its schema) and its examples. */
export function EventTypeView({ name }: { name: string }) {
  const client = useClient();
  const loaded = useLoad(() => unwrap(client.GET("/v1/event-types/{name}", { params: { path: { name } } })), name);
  if (loaded.error?.status === 404) {
    return (
      <>
        <ViewTitle>Event type not found</ViewTitle>
        <p>
          No event type is called <span class="mono">{name}</span>.
        </p>
        <p>
          <a href={eventTypesHref}>Back to the event types</a>
        </p>
      </>
    );
  }
  const type = loaded.data;
  if (!type) {
    return (
      <>
        <ViewTitle>Event type</ViewTitle>
        <ErrorAlert error={loaded.error} />
        {loaded.loading && <p>Loading…</p>}
      </>
    );
  }
  const fields = type.schema ? schemaFields(type.schema) : undefined;
  const exampleTime = new Date().toISOString();
  return (
    <>
      <p class="crumbs">
        <a href={eventTypesHref}>Event types</a> /
      </p>
      <ViewTitle>
        <span class="mono break">{type.name}</span>
      </ViewTitle>
      {type.description ? <p class="lead">{type.description}</p> : <p class="lead">No description.</p>}
      {type.deprecated && (
        <div class="alert warn" role="status">
          <p>
            <strong>Deprecated.</strong> We still send it, but it is on its way out: move to what replaces it (its
            description says which).
          </p>
        </div>
      )}
      {type.archived && (
        <div class="alert warn" role="status">
          <p>
            <strong>Retired.</strong> This event type is kept here for reference: it may no longer be sent.
          </p>
        </div>
      )}
      <section aria-labelledby="fields-title" class="panel">
        <h2 id="fields-title">Payload</h2>
        <p class="help">
          Each webhook's body is <code>{'{"type", "timestamp", "data"}'}</code>; these are the fields of its{" "}
          <code>data</code>.
        </p>
        {!type.schema && <p>No schema is given: the payload can be any JSON object.</p>}
        {fields && fields.length > 0 && <FieldsTable fields={fields} />}
        {type.schema && (
          <details>
            <summary>JSON Schema</summary>
            <pre class="body payload mono">{JSON.stringify(type.schema, null, 2)}</pre>
            <CopyButton text={JSON.stringify(type.schema, null, 2)} label="Copy schema" />
          </details>
        )}
      </section>
      <section aria-labelledby="examples-title" class="panel">
        <h2 id="examples-title">{type.examples.length > 1 ? "Example payloads" : "Example payload"}</h2>
        {type.examples.length === 0 && <p>No example is given.</p>}
        {type.examples.map((example, index) => {
          const body = JSON.stringify({ type: type.name, timestamp: exampleTime, data: example }, null, 2);
          return (
            <figure key={index} class="example">
              <figcaption class="small muted">
                {type.examples.length > 1 ? `Example ${index + 1}: a` : "A"} webhook of this type as your endpoint
                receives it (<code>timestamp</code> is when the event is published).
              </figcaption>
              <pre class="body payload mono">{body}</pre>
              <CopyButton text={body} label="Copy example" />
            </figure>
          );
        })}
      </section>
      <p>
        <a href={newEndpointHref}>Add an endpoint</a> to receive it, or choose it in an endpoint's settings.
      </p>
    </>
  );
}

function FieldsTable({ fields }: { fields: SchemaField[] }) {
  return (
    <table class="cards fields">
      <caption class="sr-only">Fields of the payload</caption>
      <thead>
        <tr>
          <th scope="col">Field</th>
          <th scope="col">Type</th>
          <th scope="col">Required</th>
          <th scope="col">Description</th>
        </tr>
      </thead>
      <tbody>
        {fields.map((field) => (
          <tr key={field.path}>
            <td data-label="Field" class="mono break">
              {field.path}
            </td>
            <td data-label="Type">{field.type}</td>
            <td data-label="Required">{field.required}</td>
            <td data-label="Description">{field.description || <span class="muted">—</span>}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
