import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError } from './api.ts';

export interface Loaded<T> {
  data: T | null;
  error: ApiError | null;
  loading: boolean;
  reload: () => Promise<void>;
}

/** Loads `load()` when `key` changes; `reload` fetches again (after a change the page made). */
export function useLoad<T>(load: () => Promise<T>, key: string): Loaded<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [loading, setLoading] = useState(true);
  const run = useCallback(load, [key]);
  const reload = useCallback(async () => {
    setLoading(true);
    try {
      setData(await run());
      setError(null);
    } catch (err) {
      setError(asApiError(err));
    } finally {
      setLoading(false);
    }
  }, [run]);
  useEffect(() => {
    setData(null);
    void reload();
  }, [reload]);
  return { data, error, loading, reload };
}

export function asApiError(err: unknown): ApiError {
  return err instanceof ApiError ? err : new ApiError(0, err instanceof Error ? err.message : String(err), 'client_error');
}

/** Runs one action at a time for a button, keeping its error beside it. */
export function useAction(): { busy: boolean; error: ApiError | null; run: (action: () => Promise<unknown>) => void; clear: () => void } {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const run = useCallback((action: () => Promise<unknown>) => {
    setBusy(true);
    setError(null);
    action().then(
      () => setBusy(false),
      (err: unknown) => {
        setError(asApiError(err));
        setBusy(false);
      },
    );
  }, []);
  return { busy, error, run, clear: () => setError(null) };
}
