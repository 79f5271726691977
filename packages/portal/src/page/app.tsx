import { useCallback, useEffect, useMemo, useState } from "preact/hooks";
import { createPortalClient } from "./api.ts";
import { DeliveriesView } from "./deliveries.tsx";
import { DeliveryView } from "./delivery.tsx";
import { EndpointView } from "./endpoint.tsx";
import { EndpointsView, NewEndpointView } from "./endpoints.tsx";
import { ClientContext } from "./hooks.ts";
import { deliveriesHref, endpointsHref, type Route, useRoute } from "./route.ts";
import { forgetToken, storedToken, takeTokenFromLink } from "./token.ts";

export const LINK_INVALID = "This link has expired or is not valid; ask for a new one.";

/**
 * The portal: the token from the link (or this tab's storage), then the views. Any 401 from the
 * API means the token expired or was never valid: the page says so instead of showing errors.
 */
export function App() {
  const [token, setToken] = useState(() => takeTokenFromLink() ?? storedToken());
  const [invalid, setInvalid] = useState(false);
  const onLink = useCallback(() => {
    const fresh = takeTokenFromLink();
    if (fresh) {
      setToken(fresh);
      setInvalid(false);
    }
  }, []);
  const route = useRoute(onLink);
  const client = useMemo(
    () =>
      token
        ? createPortalClient(token, () => {
            forgetToken();
            setInvalid(true);
          })
        : undefined,
    [token],
  );

  if (!client || invalid) return <LinkInvalid />;
  return (
    <ClientContext.Provider value={client}>
      <Shell route={route} />
    </ClientContext.Provider>
  );
}

function LinkInvalid() {
  return (
    <main class="gone" id="main">
      <h1>{LINK_INVALID}</h1>
      <p>
        Links to this page work for a limited time and only for the account they were made for. Open it again from the
        product that sent you here, or ask its team for a new link.
      </p>
    </main>
  );
}

function Shell({ route }: { route: Route }) {
  const section = route.name === "deliveries" || route.name === "delivery" ? "deliveries" : "endpoints";
  const where =
    route.name === "deliveries"
      ? `deliveries?${route.query.toString()}`
      : "id" in route
        ? `${route.name}/${route.id}`
        : route.name;
  // A new view moves focus to its heading, as a new page would: keyboard and screen reader users start there.
  useEffect(() => document.getElementById("view-title")?.focus(), [where]);
  return (
    <>
      {/* biome-ignore lint/a11y/useValidAnchor: a skip link is a link to users; the fragment holds the route, so it moves focus itself */}
      <a
        class="skip"
        href="#main"
        onClick={(event) => {
          // The fragment holds the route: move focus without changing it.
          event.preventDefault();
          document.getElementById("view-title")?.focus();
        }}
      >
        Skip to content
      </a>
      <header class="top">
        <p class="brand">Webhooks</p>
        <nav aria-label="Sections">
          <a href={endpointsHref} aria-current={section === "endpoints" ? "page" : undefined}>
            Endpoints
          </a>
          <a href={deliveriesHref({})} aria-current={section === "deliveries" ? "page" : undefined}>
            Delivery log
          </a>
        </nav>
      </header>
      <main id="main">
        <View route={route} />
      </main>
    </>
  );
}

function View({ route }: { route: Route }) {
  switch (route.name) {
    case "endpoints":
      return <EndpointsView />;
    case "new-endpoint":
      return <NewEndpointView />;
    case "endpoint":
      return <EndpointView id={route.id} />;
    case "deliveries":
      return <DeliveriesView query={route.query} />;
    case "delivery":
      return <DeliveryView id={route.id} />;
  }
}
