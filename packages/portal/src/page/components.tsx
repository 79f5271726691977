import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import type { ApiError } from "./api.ts";
import { formatTime } from "./format.ts";

/** The API's message, where a screen reader announces it at once. */
export function ErrorAlert({ error }: { error: ApiError | undefined }) {
  if (!error) return null;
  return (
    <div class="alert" role="alert">
      <p>{error.message}</p>
      {error.requestId && <p class="small">Reference for support: {error.requestId}</p>}
    </div>
  );
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

export function Time({ iso }: { iso: string | null | undefined }) {
  if (!iso) return <span class="muted">—</span>;
  return <time dateTime={iso}>{formatTime(iso)}</time>;
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
