import type { ApiKeyInfo, CreatedApiKey, Project } from '../projects/service.ts';

/** The admin API over HTTP, as the CLI uses it. Errors carry the server's error message. */
export class AdminClient {
  readonly #url: string;
  readonly #token: string;

  constructor(url: string, token: string) {
    this.#url = url.replace(/\/+$/, '');
    this.#token = token;
  }

  createProject(name: string): Promise<Project> {
    return this.#call('POST', '/admin/projects', { name });
  }
  listProjects(): Promise<Project[]> {
    return this.#all('/admin/projects');
  }
  createKey(projectId: string, name: string | null): Promise<CreatedApiKey> {
    return this.#call('POST', `/admin/projects/${encodeURIComponent(projectId)}/keys`, { name });
  }
  listKeys(projectId: string): Promise<ApiKeyInfo[]> {
    return this.#all(`/admin/projects/${encodeURIComponent(projectId)}/keys`);
  }
  revokeKey(keyId: string): Promise<ApiKeyInfo> {
    return this.#call('DELETE', `/admin/keys/${encodeURIComponent(keyId)}`);
  }

  /** Follows `?after=` pages until a short page. */
  async #all<T extends { id: string }>(path: string): Promise<T[]> {
    const items: T[] = [];
    let after: string | undefined;
    for (;;) {
      const query = new URLSearchParams({ limit: '1000', ...(after ? { after } : {}) });
      const page = await this.#call<T[]>('GET', `${path}?${query.toString()}`);
      items.push(...page);
      if (page.length < 1000) return items;
      after = page.at(-1)?.id;
    }
  }

  async #call<T>(method: string, path: string, body?: unknown): Promise<T> {
    let res: Response;
    try {
      res = await fetch(this.#url + path, {
        method,
        headers: { authorization: `Bearer ${this.#token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (e) {
      throw new Error(`Cannot reach Troupe at ${this.#url}: ${(e as Error).message}. Is the server running? Set --url or TROUPE_URL.`, { cause: e });
    }
    const text = await res.text();
    if (!res.ok) {
      let message = text;
      try {
        message = (JSON.parse(text) as { error: { message: string } }).error.message;
      } catch {
        // Not our error body; show it as it is.
      }
      throw new Error(`HTTP ${res.status}: ${message}`);
    }
    return JSON.parse(text) as T;
  }
}
