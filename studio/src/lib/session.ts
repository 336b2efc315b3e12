import { useEffect, useState } from 'preact/hooks';

// The key lives in this tab's sessionStorage only: never in localStorage, cookies or page URLs.
const API_KEY = 'troupe-studio.api-key';
const ADMIN_TOKEN = 'troupe-studio.admin-token';

export interface SessionState {
  apiKey: string | null;
  adminToken: string | null;
  /** Why the person was signed out (a revoked key), shown on the sign-in form. */
  notice: string | null;
}

let notice: string | null = null;
const listeners = new Set<() => void>();

function read(): SessionState {
  return { apiKey: sessionStorage.getItem(API_KEY), adminToken: sessionStorage.getItem(ADMIN_TOKEN), notice };
}

function changed(): void {
  for (const listener of listeners) listener();
}

export const session = {
  get apiKey(): string | null {
    return sessionStorage.getItem(API_KEY);
  },
  get adminToken(): string | null {
    return sessionStorage.getItem(ADMIN_TOKEN);
  },
  signIn(apiKey: string, adminToken: string | null): void {
    sessionStorage.setItem(API_KEY, apiKey);
    if (adminToken) sessionStorage.setItem(ADMIN_TOKEN, adminToken);
    else sessionStorage.removeItem(ADMIN_TOKEN);
    notice = null;
    changed();
  },
  /** Forgets the key (and the admin token); `reason` is shown where a new key is asked for. */
  signOut(reason: string | null = null): void {
    sessionStorage.removeItem(API_KEY);
    sessionStorage.removeItem(ADMIN_TOKEN);
    notice = reason;
    changed();
  },
  forgetAdminToken(): void {
    sessionStorage.removeItem(ADMIN_TOKEN);
    changed();
  },
};

export function useSession(): SessionState {
  const [state, setState] = useState(read);
  useEffect(() => {
    const listener = () => setState(read());
    listeners.add(listener);
    return () => listeners.delete(listener);
  }, []);
  return state;
}
