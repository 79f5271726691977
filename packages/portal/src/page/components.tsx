import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import type { ApiError } from "./api.ts";
import { formatTime } from "./format.ts";
import { explain, type Problem } from "./problems.ts";

/**
 * What went wrong, in the customer's words, where a screen reader announces it at once: an API
 * error (explained here), or a problem a form already explained and could not put by a field.
 */
export function ErrorAlert({ error, problem }: { error?: ApiError | undefined; problem?: Problem | undefined }) {
  const shown = problem ?? (error ? explain(error) : undefined);
  if (!shown) return null;
  return (
    <div class="alert" role="alert">
      <p>{shown.message}</p>
      {shown.requestId && <p class="small">Reference for support: {shown.requestId}</p>}
    </div>
  );
}

/** A form's problem, under the field it is about. */
export function FieldError({ id, field, problem }: { id: string; field: string; problem: Problem | undefined }) {
  if (problem?.field !== field) return null;
  return (
    <p id={`${id}-error`} class="field-error" role="alert">
      {problem.message}
    </p>
  );
}

/** What ties an input to its help and to its FieldError: aria-invalid and aria-describedby. */
export function fieldAria(id: string, field: string, problem: Problem | undefined, help?: string) {
  const invalid = problem?.field === field;
  const describedBy = [help, invalid ? `${id}-error` : undefined].filter(Boolean).join(" ");
  return { "aria-invalid": invalid ? ("true" as const) : undefined, "aria-describedby": describedBy || undefined };
}

/**
 * The form's problem, and the alert for one that is about no field of this form. When a problem
 * is about a field, the field takes the focus, so the customer starts typing where the fix goes:
 * once per failure (`cause`, the error or problem object it came from), not at every keystroke.
 */
export function useFormProblem(
  problem: Problem | undefined,
  inputs: Record<string, string>,
  cause: unknown,
): Problem | undefined {
  const input = problem?.field === undefined ? undefined : inputs[problem.field];
  useEffect(() => {
    if (input) document.getElementById(input)?.focus();
  }, [cause]);
  return problem && input === undefined ? { ...problem, field: undefined } : undefined;
}

/** A short confirmation of what just happened, announced politely. */
export function Notice({ children }: { children: ComponentChildren }) {
  return (
    <div class="notice" role="status">
      {children}
    </div>
  );
}

export function Badge({ tone, children }: { tone: "good" | "warn" | "bad" | "muted"; children: ComponentChildren }) {
  return <span class={`badge badge-${tone}`}>{children}</span>;
}

/** A time in the viewer's zone, with the zone shown; UTC in the tooltip and the markup. */
export function Time({ iso }: { iso: string | null | undefined }) {
  if (!iso) return <span class="muted">—</span>;
  return (
    <time dateTime={iso} title={`${iso} (UTC)`}>
      {formatTime(iso)}
    </time>
  );
}

/** A button that copies `text`, and says whether it could. */
export function CopyButton({ text, label }: { text: string; label: string }) {
  const [copied, setCopied] = useState<string | undefined>(undefined);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setCopied("Copied to the clipboard.");
    } catch {
      setCopied("Could not copy: select the text and copy it yourself.");
    }
  };
  return (
    <>
      <button type="button" onClick={copy}>
        {label}
      </button>
      {copied && (
        <span role="status" class="small">
          {" "}
          {copied}
        </span>
      )}
    </>
  );
}

/**
 * A signing secret, shown this once: the API never returns it again. A copy button, and a clear
 * word that it cannot be seen later.
 */
export function SecretOnce({ secret, title }: { secret: string; title: string }) {
  const [copied, setCopied] = useState<string | undefined>(undefined);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(secret);
      setCopied("Copied to the clipboard.");
    } catch {
      setCopied("Could not copy: select the secret and copy it yourself.");
    }
  };
  return (
    <section class="secret" aria-labelledby="secret-title">
      <h2 id="secret-title">{title}</h2>
      <p>
        Use it to verify the <code>webhook-signature</code> header of every webhook.{" "}
        <strong>Store it now: it will not be shown again.</strong>
      </p>
      <label for="secret-value">Signing secret</label>
      <div class="secret-row">
        <input
          id="secret-value"
          class="mono"
          readOnly
          value={secret}
          onFocus={(event) => event.currentTarget.select()}
        />
        <button type="button" onClick={copy}>
          Copy
        </button>
      </div>
      {copied && (
        <p role="status" class="small">
          {copied}
        </p>
      )}
    </section>
  );
}

/** Newer/older buttons for cursor paging: never a page count, which would mean counting a million rows. */
export function Pager({
  label,
  onNewer,
  onOlder,
}: {
  label: string;
  onNewer: (() => void) | undefined;
  onOlder: (() => void) | undefined;
}) {
  if (!onNewer && !onOlder) return null;
  return (
    <nav class="pager" aria-label={label}>
      <button type="button" onClick={onNewer} disabled={!onNewer}>
        ← Newer
      </button>
      <button type="button" onClick={onOlder} disabled={!onOlder}>
        Older →
      </button>
    </nav>
  );
}

/** The view's heading, focused when the view opens so keyboard and screen reader users land on it. */
export function ViewTitle({ children }: { children: ComponentChildren }) {
  return (
    <h1 id="view-title" tabIndex={-1}>
      {children}
    </h1>
  );
}
