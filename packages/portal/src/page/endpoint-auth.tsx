import { useState } from "preact/hooks";
import { type Subscription, unwrap } from "./api.ts";
import { Badge, ErrorAlert, FieldError, fieldAria, Notice, useFormProblem } from "./components.tsx";
import { useAction, useClient } from "./hooks.ts";
import { explain } from "./problems.ts";

/**
 * How webhooks sign in to the customer's endpoint (docs/portal.md#authentication): none, HTTP Basic,
 * or an OAuth 2.0 token got with the client-credentials grant. The password and client secret are
 * write-only: the API never returns them, so the page shows only that one is set, and asks for it
 * again with any change (the API replaces the authentication as a whole).
 */

type Method = "none" | "basic" | "oauth2_client_credentials";

const methodLabels: Record<Method, string> = {
  none: "None",
  basic: "HTTP Basic (user name and password)",
  oauth2_client_credentials: "OAuth 2.0 client credentials (a token your token endpoint issues)",
};

const INPUTS = {
  "auth.username": "auth-username",
  "auth.password": "auth-password",
  "auth.token_url": "auth-token-url",
  "auth.client_id": "auth-client-id",
  "auth.client_secret": "auth-client-secret",
  "auth.scope": "auth-scope",
  "auth.audience": "auth-audience",
};

type SectionProps = { subscription: Subscription; onChange: (subscription: Subscription) => void };

export function EndpointAuthSection({ subscription, onChange }: SectionProps) {
  const client = useClient();
  const saved = subscription.auth;
  const basic = saved?.type === "basic" ? saved : undefined;
  const oauth = saved?.type === "oauth2_client_credentials" ? saved : undefined;
  const [method, setMethod] = useState<Method>(saved?.type ?? "none");
  const [username, setUsername] = useState(basic?.username ?? "");
  const [password, setPassword] = useState("");
  const [tokenUrl, setTokenUrl] = useState(oauth?.token_url ?? "");
  const [clientId, setClientId] = useState(oauth?.client_id ?? "");
  const [clientSecret, setClientSecret] = useState("");
  const [scope, setScope] = useState(oauth?.scope ?? "");
  const [audience, setAudience] = useState(oauth?.audience ?? "");
  const [done, setDone] = useState<string | undefined>(undefined);

  const save = useAction(async () => {
    setDone(undefined);
    const auth =
      method === "none"
        ? null
        : method === "basic"
          ? { type: "basic" as const, username: username.trim(), password }
          : {
              type: "oauth2_client_credentials" as const,
              token_url: tokenUrl.trim(),
              client_id: clientId.trim(),
              client_secret: clientSecret,
              ...(scope.trim() ? { scope: scope.trim() } : {}),
              ...(audience.trim() ? { audience: audience.trim() } : {}),
            };
    const changed = await unwrap(
      client.PUT("/v1/subscriptions/{subscription_id}", {
        params: { path: { subscription_id: subscription.id } },
        body: { auth },
      }),
    );
    // Gone from the page as soon as the API has them: they are never shown back.
    setPassword("");
    setClientSecret("");
    onChange(changed);
    setDone(
      auth
        ? "Authentication saved: webhooks created from now on sign in with it."
        : "Authentication removed: webhooks created from now on are sent without it.",
    );
  });
  const problem = save.error ? explain(save.error) : undefined;
  const unplaced = useFormProblem(problem, INPUTS, save.error);

  const text = (
    field: keyof typeof INPUTS,
    label: string,
    value: string,
    set: (value: string) => void,
    extra: { help?: string; secret?: boolean; url?: boolean } = {},
  ) => {
    const id = INPUTS[field];
    const common = {
      id,
      spellcheck: false,
      value,
      onInput: (e: { currentTarget: HTMLInputElement }) => set(e.currentTarget.value),
      ...fieldAria(id, field, problem, extra.help ? `${id}-help` : undefined),
    };
    return (
      <div class="field">
        <label for={id}>{label}</label>
        {extra.secret ? (
          <input type="password" class="mono" autoComplete="new-password" {...common} />
        ) : (
          <input type="text" inputMode={extra.url ? "url" : "text"} autoComplete="off" {...common} />
        )}
        {extra.help && (
          <p id={`${id}-help`} class="help">
            {extra.help}
          </p>
        )}
        <FieldError id={id} field={field} problem={problem} />
      </div>
    );
  };
  const secretHelp = (what: string, isSaved: boolean) =>
    isSaved
      ? `A ${what} is set. We never show it: enter it again to save any change here.`
      : `We keep it encrypted and never show it again, here or anywhere.`;

  return (
    <section aria-labelledby="auth-title" class="panel">
      <h2 id="auth-title">Authentication</h2>
      <p class="help">
        For endpoints that ask every request to sign in, besides checking the signature. We add an{" "}
        <code>Authorization</code> header to every webhook.
      </p>
      <dl class="facts">
        <dt>Sign-in</dt>
        <dd>{saved ? methodLabels[saved.type] : "None"}</dd>
        {basic && (
          <>
            <dt>User name</dt>
            <dd class="mono break">{basic.username}</dd>
            <dt>Password</dt>
            <dd>
              <Badge tone="good">Set</Badge> <span class="small muted">(never shown)</span>
            </dd>
          </>
        )}
        {oauth && (
          <>
            <dt>Token URL</dt>
            <dd class="mono break">{oauth.token_url}</dd>
            <dt>Client ID</dt>
            <dd class="mono break">{oauth.client_id}</dd>
            <dt>Client secret</dt>
            <dd>
              <Badge tone="good">Set</Badge> <span class="small muted">(never shown)</span>
            </dd>
            <dt>Scope</dt>
            <dd class="mono break">{oauth.scope ?? <span class="muted">None</span>}</dd>
            <dt>Audience</dt>
            <dd class="mono break">{oauth.audience ?? <span class="muted">None</span>}</dd>
          </>
        )}
      </dl>
      <form
        class="form"
        onSubmit={(event) => {
          event.preventDefault();
          void save.run();
        }}
      >
        <fieldset class="picker">
          <legend>Sign in to your endpoint with</legend>
          {(Object.keys(methodLabels) as Method[]).map((value) => (
            <div class="choice" key={value}>
              <input
                id={`auth-method-${value}`}
                type="radio"
                name="auth-method"
                value={value}
                checked={method === value}
                onChange={() => setMethod(value)}
              />
              <label for={`auth-method-${value}`}>{methodLabels[value]}</label>
            </div>
          ))}
        </fieldset>
        {method === "basic" && (
          <>
            {text("auth.username", "User name", username, setUsername)}
            {text("auth.password", "Password", password, setPassword, {
              secret: true,
              help: secretHelp("password", basic !== undefined),
            })}
          </>
        )}
        {method === "oauth2_client_credentials" && (
          <>
            {text("auth.token_url", "Token URL", tokenUrl, setTokenUrl, {
              url: true,
              help: "Where we ask for an access token (the client-credentials grant), such as https://auth.example.com/oauth/token.",
            })}
            {text("auth.client_id", "Client ID", clientId, setClientId)}
            {text("auth.client_secret", "Client secret", clientSecret, setClientSecret, {
              secret: true,
              help: secretHelp("client secret", oauth !== undefined),
            })}
            {text("auth.scope", "Scope (optional)", scope, setScope, {
              help: "Names separated by spaces, such as webhooks:write.",
            })}
            {text("auth.audience", "Audience (optional)", audience, setAudience, {
              help: "Only if your token endpoint asks for one.",
            })}
          </>
        )}
        <p class="help">Changes apply to webhooks created from now on.</p>
        <ErrorAlert problem={unplaced} />
        {done && <Notice>{done}</Notice>}
        <div class="actions">
          <button type="submit" class="primary" disabled={save.busy}>
            Save authentication
          </button>
        </div>
      </form>
    </section>
  );
}
