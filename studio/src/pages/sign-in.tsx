import { useState } from 'preact/hooks';
import { ApiError } from '../lib/api.ts';
import { session, useSession } from '../lib/session.ts';
import { asApiError } from '../lib/use-load.ts';
import { ErrorNote, Field } from '../ui.tsx';

/** Checks a credential against the API before keeping it. */
async function check(path: string, token: string): Promise<void> {
  const response = await fetch(path, { headers: { authorization: `Bearer ${token}` } });
  if (response.ok) return;
  const body = (await response.json().catch(() => ({}))) as { error?: { message?: string; code?: string } };
  throw new ApiError(response.status, body.error?.message ?? `The server answered ${response.status}.`, body.error?.code ?? 'unknown');
}

export function SignIn() {
  const { notice } = useSession();
  const [apiKey, setApiKey] = useState('');
  const [adminToken, setAdminToken] = useState('');
  const [keyError, setKeyError] = useState<ApiError | null>(null);
  const [adminError, setAdminError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setKeyError(null);
    setAdminError(null);
    const key = apiKey.trim();
    const admin = adminToken.trim();
    const [keyResult, adminResult] = await Promise.allSettled([
      check('/characters?limit=1', key),
      admin ? check('/admin/projects', admin) : Promise.resolve(),
    ]);
    setBusy(false);
    if (keyResult.status === 'rejected') setKeyError(asApiError(keyResult.reason));
    if (adminResult.status === 'rejected') setAdminError(asApiError(adminResult.reason));
    if (keyResult.status === 'fulfilled' && adminResult.status === 'fulfilled') session.signIn(key, admin || null);
  };

  return (
    <main class="sign-in">
      <h1>Troupe Studio</h1>
      <p>Build characters, give them knowledge and capabilities, talk to them and run scenes.</p>
      {notice && (
        <p class="error" role="alert">
          {notice}
        </p>
      )}
      <form onSubmit={(e) => void submit(e)}>
        <Field label="API key" hint="The sk-troupe-… key printed at the first start. Kept in this tab only.">
          <input type="password" name="api-key" autoComplete="off" required value={apiKey} onInput={(e) => setApiKey(e.currentTarget.value)} />
        </Field>
        <ErrorNote error={keyError} />
        <Field label="Admin token (optional)" hint="TROUPE_ADMIN_TOKEN; unlocks projects and keys.">
          <input type="password" name="admin-token" autoComplete="off" value={adminToken} onInput={(e) => setAdminToken(e.currentTarget.value)} />
        </Field>
        <ErrorNote error={adminError} />
        <button type="submit" class="primary" disabled={busy || apiKey.trim() === ''}>
          {busy ? 'Checking…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
