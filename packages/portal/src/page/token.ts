// The link's token: read from the URL fragment (which browsers never send to a server, so it stays
// out of access logs), then removed from the address bar, so it is not bookmarked, shared in a
// screenshot or kept in history. sessionStorage keeps it for this tab only, across reloads.
const STORAGE_KEY = "webhooks-portal-token";

/** The token of a link just opened (`#token=...`), or undefined. Clears it from the address bar. */
export function takeTokenFromLink(): string | undefined {
  const token = new URLSearchParams(location.hash.slice(1)).get("token")?.trim();
  if (!token) return undefined;
  try {
    sessionStorage.setItem(STORAGE_KEY, token);
  } catch {
    // Storage disabled: the token lives in memory until the tab is closed or reloaded.
  }
  history.replaceState(null, "", `${location.pathname}${location.search}#/endpoints`);
  return token;
}

export function storedToken(): string | undefined {
  try {
    return sessionStorage.getItem(STORAGE_KEY) ?? undefined;
  } catch {
    return undefined;
  }
}

export function forgetToken(): void {
  try {
    sessionStorage.removeItem(STORAGE_KEY);
  } catch {
    // Nothing stored.
  }
}
