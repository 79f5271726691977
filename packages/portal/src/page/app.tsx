import { useCallback, useEffect, useMemo, useState } from "preact/hooks";
import { createPortalClient } from "./api.ts";
import { readBranding } from "./branding.ts";
import { EventTypesView, EventTypeView } from "./catalog.tsx";
import { DeliveriesView } from "./deliveries.tsx";
import { DeliveryView } from "./delivery.tsx";
import { EndpointView } from "./endpoint.tsx";
import { EndpointsView, NewEndpointView } from "./endpoints.tsx";
import { timeZoneLabel } from "./format.ts";
import { ClientContext } from "./hooks.ts";
import { deliveriesHref, endpointsHref, eventTypesHref, type Route, useRoute } from "./route.ts";
import { forgetToken, storedToken, takeTokenFromLink } from "./token.ts";

export const LINK_INVALID = "This link has expired or is not valid; ask for a new one.";

/** Read once: the server wrote it into the page. */
const branding = readBranding();

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
  useEffect(() => {
    document.title = `Link not valid · ${branding.name}`;
  }, []);
  return (
    <main class="gone" id="main">
      <h1>{LINK_INVALID}</h1>
      <p>
        Links to this page work for a limited time and only for the account they were made for. Open it again from the
        product that sent you here, or ask its team for a new link.
      </p>
      {branding.back && (
        <p>
          <a href={branding.back.url}>Back to {branding.back.label}</a>
        </p>
      )}
    </main>
  );
}

const viewNames: Record<Route["name"], string> = {
  endpoints: "Endpoints",
  "new-endpoint": "Add an endpoint",
  endpoint: "Endpoint",
  deliveries: "Delivery log",
  delivery: "Delivery",
  "event-types": "Event types",
  "event-type": "Event type",
};

/** The deployment's logo and name, and the way back to its product. */
function Brand() {
  return (
    <p class="brand">
      {branding.logoUrl && <img class="logo" src={branding.logoUrl} alt="" />}
      <span>{branding.name}</span>
    </p>
  );
}

function Shell({ route }: { route: Route }) {
  const section =
    route.name === "deliveries" || route.name === "delivery"
      ? "deliveries"
      : route.name === "event-types" || route.name === "event-type"
        ? "event-types"
        : "endpoints";
  const where =
    route.name === "deliveries"
      ? `deliveries?${route.query.toString()}`
      : "id" in route
        ? `${route.name}/${route.id}`
        : route.name;
  // A new view moves focus to its heading, as a new page would: keyboard and screen reader users start there.
  // The tab's title says where, too, as a new page's would.
  useEffect(() => {
    document.title = `${viewNames[route.name]} · ${branding.name}`;
    document.getElementById("view-title")?.focus();
  }, [where]);
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
        <Brand />
        <nav aria-label="Sections">
          <a href={endpointsHref} aria-current={section === "endpoints" ? "page" : undefined}>
            Endpoints
          </a>
          <a href={deliveriesHref({})} aria-current={section === "deliveries" ? "page" : undefined}>
            Delivery log
          </a>
          <a href={eventTypesHref} aria-current={section === "event-types" ? "page" : undefined}>
            Event types
          </a>
        </nav>
        {branding.back && (
          <a class="back" href={branding.back.url}>
            ← Back to {branding.back.label}
          </a>
        )}
      </header>
      <main id="main">
        <View route={route} />
      </main>
      <footer class="foot">
        <p class="small muted">{timesNote()}</p>
      </footer>
    </>
  );
}

/** Which clock the page's times are on: the viewer's own, named. */
function timesNote(): string {
  const zone = timeZoneLabel();
  return zone === "UTC"
    ? "Times are in UTC."
    : `Times are in your time zone, ${zone}. Point at a time to see it in UTC.`;
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
    case "event-types":
      return <EventTypesView />;
    case "event-type":
      return <EventTypeView name={route.id} />;
  }
}
