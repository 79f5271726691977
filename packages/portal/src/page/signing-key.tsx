import { useState } from "preact/hooks";
import { type Subscription, type SubscriptionWithSecret, unwrap } from "./api.ts";
import { CopyButton, ErrorAlert, Notice, SecretOnce } from "./components.tsx";
import { useAction, useClient } from "./hooks.ts";

/**
 * How an endpoint's webhooks are signed (docs/portal.md#signatures): with a shared secret
 * (hmac-sha256, `v1`), shown once, or with a key pair (ed25519, `v1a`), whose public key is shown
 * whenever the endpoint is, for it is not a secret.
 */

export type SignatureScheme = Subscription["signature_scheme"];

export const schemeLabels: Record<SignatureScheme, string> = {
  "hmac-sha256": "HMAC-SHA256, with a shared secret (v1)",
  ed25519: "Ed25519, with a public key (v1a)",
};

/** The choice made when an endpoint is created: it cannot be changed later. */
export function SchemeChoice({
  scheme,
  onChange,
}: {
  scheme: SignatureScheme;
  onChange: (scheme: SignatureScheme) => void;
}) {
  const option = (value: SignatureScheme, about: string) => (
    <div class="choice">
      <input
        id={`new-scheme-${value}`}
        type="radio"
        name="new-scheme"
        value={value}
        checked={scheme === value}
        onChange={() => onChange(value)}
      />
      <label for={`new-scheme-${value}`}>{schemeLabels[value]}</label>
      <p class="help about">{about}</p>
    </div>
  );
  return (
    <fieldset class="picker">
      <legend>How webhooks are signed</legend>
      {option(
        "hmac-sha256",
        "We show you a secret once; your receiver checks each webhook with it. Every Standard Webhooks library does this.",
      )}
      {option(
        "ed25519",
        "We keep the private key and show you a public key, which is not a secret: only we can sign. Fewer libraries check these signatures.",
      )}
      <p class="help">This cannot be changed once the endpoint is created.</p>
    </fieldset>
  );
}

/** An ed25519 endpoint's public key, to copy into the receiver's settings. */
export function PublicKey({ publicKey }: { publicKey: string }) {
  return (
    <div class="public-key">
      <label for="public-key-value">Public key</label>
      <div class="secret-row">
        <input
          id="public-key-value"
          class="mono"
          readOnly
          value={publicKey}
          onFocus={(event) => event.currentTarget.select()}
          aria-describedby="public-key-help"
        />
        <CopyButton text={publicKey} label="Copy" />
      </div>
      <p id="public-key-help" class="help">
        Check the <code>v1a</code> signatures of the <code>webhook-signature</code> header with it. It is not a secret:
        give it to whoever receives the webhooks.
      </p>
    </div>
  );
}

/** How long the old secret or key keeps signing after a rotation. */
const overlaps = (what: string) => [
  { value: "24h", label: "24 hours (recommended)" },
  { value: "1h", label: "1 hour" },
  { value: "7d", label: "7 days" },
  { value: "0s", label: `None: the old ${what} stops at once` },
];

/** The endpoint's signature scheme, its public key (ed25519), and rotation of its secret or key pair. */
export function SigningSection({
  subscription,
  onChange,
}: {
  subscription: Subscription;
  onChange: (subscription: Subscription) => void;
}) {
  const client = useClient();
  const ed25519 = subscription.signature_scheme === "ed25519";
  const [overlap, setOverlap] = useState("24h");
  const [rotated, setRotated] = useState<SubscriptionWithSecret | undefined>(undefined);
  const rotate = useAction(async () => {
    const result = await unwrap(
      client.POST("/v1/subscriptions/{subscription_id}/rotate_secret", {
        params: { path: { subscription_id: subscription.id } },
        body: { overlap },
      }),
    );
    setRotated(result);
    const { secret: _secret, ...withoutSecret } = result;
    onChange(withoutSecret);
  });
  const choices = overlaps(ed25519 ? "key" : "secret");
  const overlapLabel = choices.find((option) => option.value === overlap)?.label ?? overlap;
  return (
    <section aria-labelledby="rotate-title" class="panel">
      <h2 id="rotate-title">{ed25519 ? "Signing key" : "Signing secret"}</h2>
      <dl class="facts">
        <dt>Signature scheme</dt>
        <dd>{schemeLabels[subscription.signature_scheme]}</dd>
      </dl>
      {ed25519 && subscription.public_key && <PublicKey publicKey={subscription.public_key} />}
      <p class="help">
        {ed25519
          ? "Rotating makes a new key pair, and the public key above changes. Until the overlap ends, every webhook is signed with both the new and the old key, so you can update your receiver without missing any."
          : "Rotating makes a new secret. Until the overlap ends, every webhook is signed with both the new and the old secret, so you can update your receiver without missing any."}
      </p>
      {rotated && !ed25519 && <SecretOnce secret={rotated.secret ?? ""} title="Your new signing secret" />}
      {rotated && ed25519 && (
        <Notice>
          New key pair made: the public key above is the new one.{" "}
          {overlap === "0s"
            ? "The old key no longer signs."
            : `The old key signs too for ${overlapLabel.replace(" (recommended)", "")}.`}
        </Notice>
      )}
      {!rotated && (
        <form
          class="form inline"
          onSubmit={(event) => {
            event.preventDefault();
            void rotate.run();
          }}
        >
          <div class="field">
            <label for="rotate-overlap">
              {ed25519 ? "Keep the old key valid for" : "Keep the old secret valid for"}
            </label>
            <select id="rotate-overlap" value={overlap} onChange={(e) => setOverlap(e.currentTarget.value)}>
              {choices.map((option) => (
                <option key={option.value} value={option.value}>
                  {option.label}
                </option>
              ))}
            </select>
          </div>
          <div class="actions">
            <button type="submit" disabled={rotate.busy}>
              {ed25519 ? "Rotate key" : "Rotate secret"}
            </button>
          </div>
        </form>
      )}
      <ErrorAlert error={rotate.error} />
    </section>
  );
}
