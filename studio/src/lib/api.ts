import { session } from './session.ts';

/** An API error as the server sent it: `{error: {message, type, param, code}}`. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly param: string | null;

  constructor(status: number, message: string, code: string, param: string | null = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.param = param;
  }
}

type Credential = 'key' | 'admin';

export function authHeader(credential: Credential): Record<string, string> {
  const token = credential === 'admin' ? session.adminToken : session.apiKey;
  return token ? { authorization: `Bearer ${token}` } : {};
}

/** Turns a failed reply into an ApiError, and a rejected credential into a sign-out. */
export function toApiError(status: number, text: string, credential: Credential): ApiError {
  let error: ApiError;
  try {
    const body = JSON.parse(text) as { error?: { message?: string; code?: string; param?: string | null } };
    error = new ApiError(status, body.error?.message ?? `The server answered ${status}.`, body.error?.code ?? 'unknown', body.error?.param ?? null);
  } catch {
    error = new ApiError(status, `The server answered ${status}${text ? `: ${text.slice(0, 200)}` : ''}.`, 'unknown');
  }
  if (status === 401 && credential === 'key') session.signOut(`${error.message} Paste a valid API key to go on.`);
  if (status === 401 && credential === 'admin') session.forgetAdminToken();
  return error;
}

async function request<T>(method: string, path: string, body: unknown, credential: Credential): Promise<T> {
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers: { ...authHeader(credential), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? null : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, 'The Troupe server does not answer. Is it running?', 'network_error');
  }
  const text = await response.text();
  if (!response.ok) throw toApiError(response.status, text, credential);
  return (text ? JSON.parse(text) : null) as T;
}

export const api = {
  get: <T>(path: string) => request<T>('GET', path, undefined, 'key'),
  post: <T>(path: string, body: unknown = undefined) => request<T>('POST', path, body, 'key'),
  patch: <T>(path: string, body: unknown) => request<T>('PATCH', path, body, 'key'),
  delete: <T>(path: string) => request<T>('DELETE', path, undefined, 'key'),
};

export const adminApi = {
  get: <T>(path: string) => request<T>('GET', path, undefined, 'admin'),
  post: <T>(path: string, body: unknown) => request<T>('POST', path, body, 'admin'),
  delete: <T>(path: string) => request<T>('DELETE', path, undefined, 'admin'),
};

/** A same-origin WebSocket URL; the API takes the key as `?token=` because browsers cannot set headers on sockets. */
export function socketUrl(path: string): string {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${location.host}${path}?token=${encodeURIComponent(session.apiKey ?? '')}`;
}

export const enc = encodeURIComponent;
