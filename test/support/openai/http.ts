// Small node:http helpers for the fake upstream, apart so the server file reads as its routes.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorBody, type ErrorSpec } from './wire.ts';

/** Each call hands out one pushed item in order: events already seen are not lost to a late waiter. */
export function eventQueue<T>() {
  const ready: T[] = [];
  const waiting: { resolve: (value: T) => void; reject: (error: Error) => void }[] = [];
  let failure: Error | null = null;
  return {
    push(value: T): void {
      const waiter = waiting.shift();
      if (waiter) waiter.resolve(value);
      else ready.push(value);
    },
    next(): Promise<T> {
      if (ready.length > 0) return Promise.resolve(ready.shift() as T);
      if (failure) return Promise.reject(failure);
      return new Promise((resolve, reject) => waiting.push({ resolve, reject }));
    },
    fail(error: Error): void {
      failure = error;
      for (const waiter of waiting.splice(0)) waiter.reject(error);
    },
  };
}

export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (part: Buffer) => parts.push(part));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
    req.on('close', () => reject(new Error('request closed before its body ended'))); // no-op after 'end'
  });
}

export function sendJson(res: ServerResponse, status: number, payload: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(payload);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export function sendError(res: ServerResponse, spec: ErrorSpec): void {
  sendJson(res, spec.status, errorBody(spec), spec.headers);
}

/** Writes with backpressure (`onWait` is told when it waits); false once the client is gone. */
export async function write(res: ServerResponse, text: string | Uint8Array, onWait?: () => void): Promise<boolean> {
  if (res.destroyed) return false;
  if (!res.write(text)) {
    onWait?.();
    await new Promise<void>((resolve) => {
      const done = () => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
  }
  return !res.destroyed;
}

export function waitForClose(res: ServerResponse): Promise<void> {
  if (res.destroyed) return Promise.resolve();
  return new Promise((resolve) => res.once('close', () => resolve()));
}
