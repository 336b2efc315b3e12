/** A thin fetch wrapper for tests: real HTTP, parsed JSON, and a status assertion. */
export interface ApiResponse {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- test responses are checked field by field
  text: string;
}

export class PendingResponse implements PromiseLike<ApiResponse> {
  readonly #promise: Promise<ApiResponse>;
  constructor(promise: Promise<ApiResponse>) {
    this.#promise = promise;
  }
  then<A = ApiResponse, B = never>(
    onfulfilled?: ((value: ApiResponse) => A | PromiseLike<A>) | null,
    onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): PromiseLike<A | B> {
    return this.#promise.then(onfulfilled, onrejected);
  }
  /** Resolves to the body when the status matches, otherwise fails with the whole reply. */
  async expect(status: number): Promise<any> { // eslint-disable-line @typescript-eslint/no-explicit-any
    const res = await this.#promise;
    if (res.status !== status) throw new Error(`expected HTTP ${status}, got ${res.status}: ${res.text}`);
    return res.body;
  }
}

export class ApiClient {
  readonly baseUrl: string;
  readonly #key: string | null;

  constructor(baseUrl: string, key: string | null) {
    this.baseUrl = baseUrl;
    this.#key = key;
  }

  get(path: string, headers: Record<string, string> = {}): PendingResponse {
    return this.request('GET', path, undefined, headers);
  }
  post(path: string, body?: unknown, headers: Record<string, string> = {}): PendingResponse {
    return this.request('POST', path, body, headers);
  }
  patch(path: string, body?: unknown): PendingResponse {
    return this.request('PATCH', path, body);
  }
  delete(path: string): PendingResponse {
    return this.request('DELETE', path);
  }

  request(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): PendingResponse {
    const init: RequestInit = { method, headers: { ...headers } };
    if (this.#key) (init.headers as Record<string, string>).authorization = `Bearer ${this.#key}`;
    if (body !== undefined) {
      init.body = typeof body === 'string' ? body : JSON.stringify(body);
      (init.headers as Record<string, string>)['content-type'] ??= 'application/json';
    }
    return new PendingResponse(
      fetch(this.baseUrl + path, init).then(async (res) => {
        const text = await res.text();
        let parsed: unknown = undefined;
        if (res.headers.get('content-type')?.includes('json') && text) parsed = JSON.parse(text);
        return { status: res.status, headers: res.headers, body: parsed, text };
      }),
    );
  }
}
