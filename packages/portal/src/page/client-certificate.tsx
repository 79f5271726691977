import { useState } from "preact/hooks";
import { type Subscription, unwrap } from "./api.ts";
import { Badge, ErrorAlert, FieldError, fieldAria, Notice, Time, useFormProblem } from "./components.tsx";
import { useAction, useClient } from "./hooks.ts";
import { explain } from "./problems.ts";

/**
 * The client certificate an endpoint's webhooks present for mutual TLS
 * (docs/portal.md#authentication): its fingerprint and expiry when one is set, a form to add or
 * replace it (certificate and private key, in PEM), and removal. The private key is write-only:
 * the page forgets it once the API has it.
 */

const INPUTS = {
  "client_certificate.certificate": "certificate-pem",
  "client_certificate.private_key": "certificate-key",
};

const DAY_MS = 86_400_000;

/** Whether a certificate's expiry deserves a word: expired, or within 30 days. */
function expiry(notAfter: string): { tone: "bad" | "warn"; label: string } | undefined {
  const left = Date.parse(notAfter) - Date.now();
  if (left <= 0) return { tone: "bad", label: "Expired" };
  if (left < 30 * DAY_MS) return { tone: "warn", label: "Expires soon" };
  return undefined;
}

export function ClientCertificateSection({
  subscription,
  onChange,
}: {
  subscription: Subscription;
  onChange: (subscription: Subscription) => void;
}) {
  const client = useClient();
  const current = subscription.client_certificate;
  const [editing, setEditing] = useState(false);
  const [confirming, setConfirming] = useState(false);
  const [certificate, setCertificate] = useState("");
  const [privateKey, setPrivateKey] = useState("");
  const [done, setDone] = useState<string | undefined>(undefined);

  const put = async (clientCertificate: { certificate: string; private_key: string } | null) =>
    unwrap(
      client.PUT("/v1/subscriptions/{subscription_id}", {
        params: { path: { subscription_id: subscription.id } },
        body: { client_certificate: clientCertificate },
      }),
    );
  const save = useAction(async () => {
    setDone(undefined);
    const changed = await put({ certificate, private_key: privateKey });
    setCertificate("");
    setPrivateKey("");
    setEditing(false);
    onChange(changed);
    setDone("Certificate saved: webhooks created from now on present it.");
  });
  const remove = useAction(async () => {
    setDone(undefined);
    onChange(await put(null));
    setConfirming(false);
    setDone("Certificate removed: webhooks created from now on present none.");
  });
  const problem = save.error ? explain(save.error) : undefined;
  const unplaced = useFormProblem(problem, INPUTS, save.error);
  const warning = current ? expiry(current.not_after) : undefined;

  const pem = (
    field: keyof typeof INPUTS,
    label: string,
    value: string,
    set: (value: string) => void,
    help: string,
  ) => {
    const id = INPUTS[field];
    return (
      <div class="field">
        <label for={id}>{label}</label>
        <textarea
          id={id}
          rows={6}
          class="mono"
          spellcheck={false}
          autoComplete="off"
          value={value}
          onInput={(e) => set(e.currentTarget.value)}
          {...fieldAria(id, field, problem, `${id}-help`)}
        />
        <p id={`${id}-help`} class="help">
          {help}
        </p>
        <FieldError id={id} field={field} problem={problem} />
      </div>
    );
  };

  return (
    <section aria-labelledby="certificate-title" class="panel">
      <h2 id="certificate-title">Client certificate</h2>
      <p class="help">
        For endpoints that ask for mutual TLS: we present this certificate when we connect to deliver a webhook.
      </p>
      {current ? (
        <dl class="facts">
          <dt>Fingerprint (SHA-256)</dt>
          <dd class="mono break">{current.fingerprint_sha256}</dd>
          <dt>Valid until</dt>
          <dd>
            <Time iso={current.not_after} /> {warning && <Badge tone={warning.tone}>{warning.label}</Badge>}
          </dd>
          <dt>Private key</dt>
          <dd>
            <Badge tone="good">Set</Badge> <span class="small muted">(never shown)</span>
          </dd>
        </dl>
      ) : (
        <p>No client certificate.</p>
      )}
      {warning && (
        <p class="help">Webhooks fail once it has expired, if your endpoint checks it: replace it before then.</p>
      )}
      {editing ? (
        <form
          class="form"
          onSubmit={(event) => {
            event.preventDefault();
            void save.run();
          }}
        >
          {pem(
            "client_certificate.certificate",
            "Certificate (PEM)",
            certificate,
            setCertificate,
            "From -----BEGIN CERTIFICATE----- to -----END CERTIFICATE-----, followed by any intermediate certificates.",
          )}
          {pem(
            "client_certificate.private_key",
            "Private key (PEM)",
            privateKey,
            setPrivateKey,
            "The certificate's private key, unencrypted. We keep it encrypted and never show it again.",
          )}
          <ErrorAlert problem={unplaced} />
          <div class="actions">
            <button type="submit" class="primary" disabled={save.busy}>
              Save certificate
            </button>
            <button
              type="button"
              onClick={() => {
                setEditing(false);
                setCertificate("");
                setPrivateKey("");
                save.clearError();
              }}
            >
              Cancel
            </button>
          </div>
        </form>
      ) : confirming ? (
        <fieldset class="actions confirm">
          <legend class="sr-only">Confirm removal</legend>
          <button type="button" class="danger" onClick={() => void remove.run()} disabled={remove.busy}>
            Yes, remove it
          </button>
          <button type="button" onClick={() => setConfirming(false)}>
            Keep it
          </button>
        </fieldset>
      ) : (
        <div class="actions">
          <button
            type="button"
            onClick={() => {
              setDone(undefined);
              setEditing(true);
            }}
          >
            {current ? "Replace certificate" : "Add a certificate"}
          </button>
          {current && (
            <button type="button" class="danger" onClick={() => setConfirming(true)}>
              Remove certificate
            </button>
          )}
        </div>
      )}
      <ErrorAlert error={remove.error} />
      {done && <Notice>{done}</Notice>}
    </section>
  );
}
