import { useState } from "preact/hooks";
import { matching, useCatalog } from "./catalog.tsx";
import { Badge, FieldError, fieldAria } from "./components.tsx";
import { formatEventTypes, parseEventTypes } from "./format.ts";
import type { Problem } from "./problems.ts";
import { eventTypesHref } from "./route.ts";

const ALL = "*";

/**
 * Events the service itself publishes about an endpoint (docs/api.md#operational-events): `*` does
 * not include them, so they are offered on their own.
 */
const OPERATIONAL = [
  { name: "operational.subscription.disabled", description: "We stopped sending to one of your endpoints." },
  {
    name: "operational.subscription.circuit_opened",
    description: "We paused sending to an endpoint after repeated failures.",
  },
  { name: "operational.subscription.circuit_closed", description: "We resumed sending to that endpoint." },
];

/**
 * The event types an endpoint receives: every type, or the catalog's names to tick (with their
 * descriptions), the service's own notices, and any other names typed in. Without a catalog (none
 * described, or it cannot be read) it is the list typed in, as the API takes it. The first input
 * has the id `id`, so that a problem can move the focus there.
 */
export function EventPicker({
  id,
  events,
  onChange,
  problem,
}: {
  id: string;
  events: string[];
  onChange: (events: string[]) => void;
  problem: Problem | undefined;
}) {
  const catalog = useCatalog();
  const [search, setSearch] = useState("");
  const known = catalog.data ?? [];
  const offered = new Set([...known.map((type) => type.name), ...OPERATIONAL.map((type) => type.name)]);
  const others = events.filter((name) => name !== ALL && !offered.has(name));
  // What the customer typed; until then, the names the endpoint has that the lists do not offer
  // (known only once the catalog is loaded).
  const [typed, setTyped] = useState<string | undefined>(undefined);
  const othersText = typed ?? formatEventTypes(others);

  if (catalog.loading && !catalog.data) return <p class="small muted">Loading the event types…</p>;
  if (known.length === 0) {
    return (
      <div class="field">
        <label for={id}>Event types</label>
        <input
          id={id}
          required
          value={formatEventTypes(events)}
          onInput={(event) => onChange(parseEventTypes(event.currentTarget.value))}
          {...fieldAria(id, "events", problem, `${id}-help`)}
        />
        <p id={`${id}-help`} class="help">
          Separate them with commas, such as <code>invoice.paid, invoice.payment_failed</code>. <code>*</code> means
          every event type.
        </p>
        <FieldError id={id} field="events" problem={problem} />
      </div>
    );
  }

  const all = events.includes(ALL);
  const chosen = new Set(events);
  // The order of the page, whatever the order of clicks: every type first, the catalog's, the notices, the rest.
  const update = (change: (next: Set<string>) => void, otherNames = parseEventTypes(othersText)) => {
    const next = new Set(chosen);
    for (const name of others) next.delete(name);
    change(next);
    const ordered = [ALL, ...known.map((type) => type.name), ...OPERATIONAL.map((type) => type.name)];
    onChange([...ordered.filter((name) => next.has(name)), ...otherNames.filter((name) => !next.has(name))]);
  };
  const toggle = (name: string, on: boolean) =>
    update((next) => {
      if (!on) next.delete(name);
      else if (name !== ALL) next.add(name);
      else {
        // Every type includes the catalog's: they stop being listed one by one.
        for (const type of known) next.delete(type.name);
        next.add(ALL);
      }
    });
  const shown = matching(known, search);

  return (
    // aria-describedby only: aria-invalid does not belong on a group.
    <fieldset
      class="field picker"
      aria-describedby={fieldAria(id, "events", problem, `${id}-help`)["aria-describedby"]}
    >
      <legend>Event types</legend>
      <p id={`${id}-help`} class="help">
        Choose what this endpoint receives. <a href={eventTypesHref}>What each event type means</a>
      </p>
      <label class="choice">
        <input
          id={id}
          type="checkbox"
          value={ALL}
          checked={all}
          onChange={(event) => toggle(ALL, event.currentTarget.checked)}
        />
        <span>
          <strong>Every event type</strong> <code>*</code>
          <span class="small muted"> — including those added later</span>
        </span>
      </label>
      {known.length > 8 && (
        <div class="field search">
          <label for={`${id}-search`}>Find an event type</label>
          <input
            id={`${id}-search`}
            type="search"
            value={search}
            onInput={(event) => setSearch(event.currentTarget.value)}
          />
        </div>
      )}
      <ul class="choices" aria-label="Event types in the catalog">
        {shown.map((type) => (
          <Choice
            key={type.name}
            id={`${id}-${type.name}`}
            name={type.name}
            description={type.description}
            deprecated={type.deprecated}
            checked={all || chosen.has(type.name)}
            disabled={all}
            onChange={(on) => toggle(type.name, on)}
          />
        ))}
      </ul>
      <details open={OPERATIONAL.some((type) => chosen.has(type.name))}>
        <summary>Notices about your endpoints</summary>
        <ul class="choices" aria-label="Notices about your endpoints">
          {OPERATIONAL.map((type) => (
            <Choice
              key={type.name}
              id={`${id}-${type.name}`}
              name={type.name}
              description={type.description}
              checked={chosen.has(type.name)}
              onChange={(on) => toggle(type.name, on)}
            />
          ))}
        </ul>
      </details>
      <details open={others.length > 0}>
        <summary>Other event types</summary>
        <label for={`${id}-others`}>Names not listed above, separated by commas</label>
        <input
          id={`${id}-others`}
          class="mono"
          value={othersText}
          onInput={(event) => {
            const text = event.currentTarget.value;
            setTyped(text);
            update(() => {}, parseEventTypes(text));
          }}
        />
      </details>
      <FieldError id={id} field="events" problem={problem} />
    </fieldset>
  );
}

/** One event type to tick: named by its name, described by its description. */
function Choice(props: {
  id: string;
  name: string;
  description: string;
  deprecated?: boolean;
  checked: boolean;
  disabled?: boolean;
  onChange: (on: boolean) => void;
}) {
  return (
    <li class="choice">
      <input
        id={props.id}
        type="checkbox"
        value={props.name}
        checked={props.checked}
        disabled={props.disabled}
        aria-describedby={props.description ? `${props.id}-about` : undefined}
        onChange={(event) => props.onChange(event.currentTarget.checked)}
      />
      <label for={props.id}>
        <span class="mono">{props.name}</span>
        {props.deprecated && (
          <>
            {" "}
            <Badge tone="warn">Deprecated</Badge>
          </>
        )}
      </label>
      {props.description && (
        <span id={`${props.id}-about`} class="small muted about">
          {props.description}
        </span>
      )}
    </li>
  );
}
