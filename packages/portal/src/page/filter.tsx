import { useState } from "preact/hooks";
import { type PayloadFilter, type Subscription, unwrap } from "./api.ts";
import { ErrorAlert, FieldError, fieldAria, Notice, useFormProblem } from "./components.tsx";
import { FilterInWords } from "./filter-words.tsx";
import { useAction, useClient } from "./hooks.ts";
import { explain, type Problem } from "./problems.ts";

const EXAMPLE = '{"data": {"amount": {"$gte": 1000}, "currency": {"$in": ["usd", "eur"]}}}';

/** The text of the form for a filter: the filter as formatted JSON, or nothing for none. */
const filterText = (filter: PayloadFilter | null) =>
  filter && Object.keys(filter).length > 0 ? JSON.stringify(filter, null, 2) : "";

/** The form's text as a filter (null for none), or what keeps it from being one, in plain words. */
export function readFilter(text: string): { filter: PayloadFilter | null } | { problem: string } {
  if (text.trim() === "") return { filter: null };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    const detail = error instanceof SyntaxError ? ` (${error.message})` : "";
    return {
      problem: `The filter is not valid JSON${detail}. Check the quotes, commas and braces, or start again from the example.`,
    };
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    return { problem: "The filter must be a JSON object, in braces { }, such as the example." };
  return { filter: parsed as PayloadFilter };
}

/**
 * An endpoint's payload filter (docs/api.md#payload-filters): what it lets through, in words, and
 * the form that changes it. The words follow the text as it is typed, so the customer sees what a
 * filter means before saving it.
 */
export function FilterSection({
  subscription,
  onChange,
}: {
  subscription: Subscription;
  onChange: (subscription: Subscription) => void;
}) {
  const client = useClient();
  const [text, setText] = useState(filterText(subscription.filter));
  const [formProblem, setFormProblem] = useState<Problem | undefined>(undefined);
  const [saved, setSaved] = useState<string | undefined>(undefined);
  const save = useAction(async (filter: PayloadFilter | null) => {
    setSaved(undefined);
    const changed = await unwrap(
      client.PUT("/v1/subscriptions/{subscription_id}", {
        params: { path: { subscription_id: subscription.id } },
        body: { filter },
      }),
    );
    onChange(changed);
    setText(filterText(changed.filter));
    setSaved(
      changed.filter
        ? "Filter saved: it applies to events published from now on."
        : "Filter removed: every event of the chosen types is sent, from now on.",
    );
  });
  const submit = (filterOrText: string | null) => {
    setSaved(undefined);
    if (filterOrText === null) {
      setFormProblem(undefined);
      void save.run(null);
      return;
    }
    const read = readFilter(filterOrText);
    if ("problem" in read) {
      setFormProblem({ field: "filter", message: read.problem });
      return;
    }
    setFormProblem(undefined);
    void save.run(read.filter);
  };
  const problem = formProblem ?? (save.error ? explain(save.error) : undefined);
  const unplaced = useFormProblem(problem, { filter: "edit-filter" }, formProblem ?? save.error);
  const draft = readFilter(text);

  return (
    <section aria-labelledby="filter-title" class="panel">
      <h2 id="filter-title">Payload filter</h2>
      <div class="filter-now">
        <FilterInWords filter={subscription.filter} />
      </div>
      <form
        class="form"
        onSubmit={(event) => {
          event.preventDefault();
          submit(text);
        }}
      >
        <div class="field">
          <label for="edit-filter">Filter (JSON)</label>
          <textarea
            id="edit-filter"
            rows={6}
            class="mono"
            spellcheck={false}
            placeholder={EXAMPLE}
            value={text}
            onInput={(event) => setText(event.currentTarget.value)}
            {...fieldAria("edit-filter", "filter", problem, "edit-filter-help")}
          />
          <div id="edit-filter-help" class="help">
            <p>
              Sends only the events that match, among the event types above. A filter looks at the event's{" "}
              <code>type</code> and at its <code>data</code>. For example <code>{EXAMPLE}</code> sends only events whose
              amount is 1000 or more, in US dollars or euros. Leave it empty to send every event.
            </p>
          </div>
          <FieldError id="edit-filter" field="filter" problem={problem} />
        </div>
        <details class="help">
          <summary>What a filter can say</summary>
          <ul>
            <li>
              <code>{'{"data": {"plan": "pro"}}'}</code>: a field equals a value.
            </li>
            <li>
              <code>$eq</code>, <code>$neq</code>: equals, does not equal. <code>$gt</code>, <code>$gte</code>,{" "}
              <code>$lt</code>, <code>$lte</code>: more than, at least, less than, at most (numbers, or dates such as{" "}
              <code>2026-01-31T12:00:00Z</code>).
            </li>
            <li>
              <code>$in</code>, <code>$nin</code>: is one of, is none of a list (<code>["usd", "eur"]</code>).{" "}
              <code>$exists</code>: <code>true</code> or <code>false</code>. <code>$startsWith</code>: text.
            </li>
            <li>
              <code>$and</code>, <code>$or</code>: a list of filters that must all, or at least one, match.{" "}
              <code>$not</code>: a filter that must not match.
            </li>
          </ul>
        </details>
        {text.trim() !== "" &&
          "filter" in draft &&
          draft.filter &&
          filterText(draft.filter) !== filterText(subscription.filter) && (
            <div class="filter-draft" aria-live="polite">
              <p class="small muted">As typed, before saving:</p>
              <FilterInWords filter={draft.filter} />
            </div>
          )}
        <ErrorAlert problem={unplaced} />
        {saved && <Notice>{saved}</Notice>}
        <div class="actions">
          <button type="submit" class="primary" disabled={save.busy}>
            Save filter
          </button>
          {subscription.filter && (
            <button type="button" onClick={() => submit(null)} disabled={save.busy}>
              Remove filter
            </button>
          )}
        </div>
      </form>
    </section>
  );
}
