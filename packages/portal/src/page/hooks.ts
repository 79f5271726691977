import { createContext } from "preact";
import { useCallback, useContext, useEffect, useRef, useState } from "preact/hooks";
import { type ApiError, asApiError, type PortalClient } from "./api.ts";

export const ClientContext = createContext<PortalClient | undefined>(undefined);

export function useClient(): PortalClient {
  const client = useContext(ClientContext);
  if (!client) throw new Error("useClient outside ClientContext");
  return client;
}

export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
  reload(): void;
}

/**
 * Loads data when `key` changes; `reload` loads it again. An answer to an older request is
 * dropped, so a slow page of the log never replaces the one asked for after it.
 */
export function useLoad<T>(load: () => Promise<T>, key: string): Loaded<T> {
  const [state, setState] = useState<{ data: T | undefined; error: ApiError | undefined; loading: boolean }>({
    data: undefined,
    error: undefined,
    loading: true,
  });
  const [generation, setGeneration] = useState(0);
  const latest = useRef(0);
  useEffect(() => {
    const request = ++latest.current;
    setState((previous) => ({ ...previous, loading: true }));
    load().then(
      (data) => request === latest.current && setState({ data, error: undefined, loading: false }),
      (error: unknown) =>
        request === latest.current &&
        setState((previous) => ({ data: previous.data, error: asApiError(error), loading: false })),
    );
    // `load` is a new closure each render; `key` says when what it loads has changed.
  }, [key, generation]);
  const reload = useCallback(() => setGeneration((value) => value + 1), []);
  return { ...state, reload };
}

/** Calls `reload` every `ms` while `active`; the page refreshes what is still in progress. */
export function usePolling(active: boolean, ms: number, reload: () => void): void {
  useEffect(() => {
    if (!active) return undefined;
    const timer = setInterval(reload, ms);
    return () => clearInterval(timer);
  }, [active, ms, reload]);
}

export interface Action<A extends unknown[]> {
  run(...args: A): Promise<void>;
  busy: boolean;
  error: ApiError | undefined;
  clearError(): void;
}

/** A button's or form's call: busy while it runs, the API's error message if it fails. */
export function useAction<A extends unknown[]>(perform: (...args: A) => Promise<void>): Action<A> {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const run = async (...args: A) => {
    setBusy(true);
    setError(undefined);
    try {
      await perform(...args);
    } catch (caught) {
      setError(asApiError(caught));
    } finally {
      setBusy(false);
    }
  };
  return { run, busy, error, clearError: () => setError(undefined) };
}
