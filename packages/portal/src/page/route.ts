import { useEffect, useState } from "preact/hooks";

/**
 * Where the page is, in the URL fragment (`#/deliveries?status=failed`), so that the browser's back
 * button, reloads and bookmarks work without the server knowing any of these paths.
 */
export type Route =
  | { name: "endpoints" }
  | { name: "new-endpoint" }
  | { name: "endpoint"; id: string }
  | { name: "deliveries"; query: URLSearchParams }
  | { name: "delivery"; id: string }
  | { name: "event-types" }
  | { name: "event-type"; id: string };

export function parseRoute(hash: string): Route {
  const [path = "", search = ""] = hash.replace(/^#\/?/, "").split("?", 2);
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "deliveries" && parts[1]) return { name: "delivery", id: parts[1] };
  if (parts[0] === "deliveries") return { name: "deliveries", query: new URLSearchParams(search) };
  if (parts[0] === "event-types" && parts[1]) return { name: "event-type", id: parts[1] };
  if (parts[0] === "event-types") return { name: "event-types" };
  if (parts[0] === "endpoints" && parts[1] === "new") return { name: "new-endpoint" };
  if (parts[0] === "endpoints" && parts[1]) return { name: "endpoint", id: parts[1] };
  return { name: "endpoints" };
}

export const endpointsHref = "#/endpoints";
export const newEndpointHref = "#/endpoints/new";
export const endpointHref = (id: string) => `#/endpoints/${encodeURIComponent(id)}`;
export const deliveryHref = (id: string) => `#/deliveries/${encodeURIComponent(id)}`;
export const eventTypesHref = "#/event-types";
export const eventTypeHref = (name: string) => `#/event-types/${encodeURIComponent(name)}`;

/** The delivery log's address for these filters and cursor; empty values are left out. */
export function deliveriesHref(query: Record<string, string | undefined>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value) params.set(name, value);
  const search = params.toString();
  return search ? `#/deliveries?${search}` : "#/deliveries";
}

export function navigate(href: string): void {
  location.hash = href.replace(/^#/, "");
}

/** The current route, following the fragment as it changes. `onLink` sees a newly pasted `#token=` link. */
export function useRoute(onLink: () => void): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  const [firstHash] = useState(() => location.hash);
  useEffect(() => {
    const changed = () => {
      if (location.hash.startsWith("#token=")) onLink();
      setRoute(parseRoute(location.hash));
    };
    addEventListener("hashchange", changed);
    // The fragment may have changed between the first render and this listener (a link followed
    // as the page loads): that hashchange was missed, so read the fragment once now.
    if (location.hash !== firstHash) setRoute(parseRoute(location.hash));
    return () => removeEventListener("hashchange", changed);
  }, [onLink, firstHash]);
  return route;
}
