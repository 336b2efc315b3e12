// The main thread's handle on PGlite running in its own worker thread (pglite-worker.ts). It offers
// the part of PGlite's API that drizzle-orm/pglite and database.ts call (query, exec, transaction,
// listen, close), so drizzle is handed this object in place of a PGlite instance.
import { Worker } from 'node:worker_threads';
import type { QueryOptions, Results } from '@electric-sql/pglite';
import { PG_ERROR_FIELDS, type QueryRequest, type Reply, type Request, type SerializedError, type WorkerData } from './pglite-protocol.ts';

/** Requests as the client builds them; the id is added when sending. */
type WithoutId<R> = R extends unknown ? Omit<R, 'id'> : never;
type Outgoing = WithoutId<Request>;

interface Pending {
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
}

/** A PostgreSQL error raised in the worker, with the same fields (`code`, `constraint`, ...) as PGlite's DatabaseError. */
export class PgliteThreadError extends Error {
  severity?: string;
  code?: string;
  detail?: string;
  constraint?: string;
  table?: string;
  column?: string;
  query?: string;
  [field: string]: unknown;

  constructor(serialized: SerializedError) {
    super(serialized.message);
    this.name = serialized.name;
    for (const key of PG_ERROR_FIELDS) {
      const value = serialized.fields[key];
      if (value !== undefined) this[key] = value;
    }
  }
}

export interface ThreadTransaction {
  query<T>(sql: string, params?: unknown[], options?: QueryOptions): Promise<Results<T>>;
  exec(sql: string): Promise<Results[]>;
  rollback(): Promise<void>;
  readonly closed: boolean;
}

/**
 * drizzle passes parsers that return PostgreSQL's text unchanged (dates, intervals, numeric[]):
 * functions cannot cross threads, so they travel as "leave these types as text". Any other
 * parser would be silently lost, so it is refused.
 */
function textOids(options: QueryOptions | undefined): number[] {
  const probe = 'pglite-thread-client';
  return Object.entries(options?.parsers ?? {}).map(([oid, parse]) => {
    if (parse(probe) !== probe) throw new Error(`PGlite in a worker thread supports only parsers that keep text as is (type ${oid})`);
    return Number(oid);
  });
}

/** The error every call gets once the worker is gone; the code maps it to 503 database_unavailable (errors.ts). */
function stoppedError(message: string, code: 'CONNECTION_CLOSED' | 'CONNECTION_ENDED', cause?: Error): Error {
  return Object.assign(new Error(message, cause ? { cause } : {}), { code });
}

/** Starts pglite-worker.ts; tests pass their own to hold the Worker. */
export type SpawnWorker = (data: WorkerData) => Worker;

// Node strips the types of a .ts worker itself, as it does for the main thread.
const spawnWorker: SpawnWorker = (workerData) => new Worker(new URL('./pglite-worker.ts', import.meta.url), { workerData });

/**
 * Structured cloning copies a typed array's whole underlying buffer, not just the view: a 1 MB
 * slice of a 50 MB upload cost a 50 MB copy on this thread. Views travel as compact copies.
 */
function compactParams(params: unknown[]): unknown[] {
  return params.map((value) => (value instanceof Uint8Array && value.byteLength !== value.buffer.byteLength ? new Uint8Array(value) : value));
}

function refuseLocalOnly(options: QueryOptions | undefined): void {
  if (options?.serializers || options?.blob || options?.onNotice) {
    throw new Error('PGlite in a worker thread does not take serializers, blob or onNotice options');
  }
}

export class PgliteThreadClient {
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  readonly #listeners = new Map<number, (payload: string) => void>();
  #nextId = 1;
  /** Set once the worker is gone: every later call fails with it at once. */
  #stopped: Error | null = null;

  private constructor(worker: Worker) {
    this.#worker = worker;
    worker.on('message', (reply: Reply) => this.#receive(reply));
    worker.on('error', (err) => this.#stop(stoppedError(`PGlite's worker thread failed: ${err.message}; restart Troupe`, 'CONNECTION_CLOSED', err)));
    worker.on('exit', (code) => this.#stop(stoppedError(`PGlite's worker thread stopped (exit code ${code}); restart Troupe`, 'CONNECTION_CLOSED')));
    // Idle, the worker holds the process no more than PGlite on the main thread did.
    worker.unref();
  }

  /** Starts the worker and opens PGlite at `location` (see preparePgliteDataDir) inside it. */
  static async start(location: string, spawn: SpawnWorker = spawnWorker): Promise<PgliteThreadClient> {
    const worker = spawn({ location });
    await new Promise<void>((resolve, reject) => {
      const failed = (err: Error) => {
        worker.off('message', onMessage);
        void worker.terminate();
        reject(err);
      };
      const onMessage = (reply: Reply) => {
        if (reply.kind === 'ready') {
          worker.off('error', failed);
          worker.off('exit', onExit);
          worker.off('message', onMessage);
          resolve();
        } else if (reply.kind === 'startFailed') {
          failed(Object.assign(new PgliteThreadError(reply.error), { message: `PGlite could not open ${location}: ${reply.error.message}` }));
        }
      };
      const onExit = (code: number) => failed(new Error(`PGlite's worker thread stopped while opening ${location} (exit code ${code})`));
      worker.on('message', onMessage);
      worker.once('error', failed);
      worker.once('exit', onExit);
    });
    return new PgliteThreadClient(worker);
  }

  query<T>(sql: string, params: unknown[] = [], options?: QueryOptions): Promise<Results<T>> {
    return this.#query<T>(undefined, sql, params, options);
  }

  exec(sql: string, options?: QueryOptions): Promise<Results[]> {
    return this.#exec(undefined, sql, options);
  }

  /**
   * Runs `callback` in one PostgreSQL transaction held open in the worker: COMMIT when it
   * resolves, ROLLBACK when it throws. As with PGlite itself, other statements wait until it ends.
   */
  async transaction<T>(callback: (tx: ThreadTransaction) => Promise<T>): Promise<T> {
    const txId = this.#nextId++;
    await this.#call({ op: 'begin' }, txId);
    let closed = false;
    const end = async (commit: boolean) => {
      if (closed) return;
      closed = true;
      await this.#call({ op: 'end', tx: txId, commit });
    };
    const tx: ThreadTransaction = {
      query: (sql, params = [], options) => this.#query(txId, sql, params, options),
      exec: (sql, options?: QueryOptions) => this.#exec(txId, sql, options),
      rollback: () => end(false),
      get closed() {
        return closed;
      },
    };
    let result: T;
    try {
      result = await callback(tx);
    } catch (err) {
      await end(false);
      throw err;
    }
    await end(true);
    return result;
  }

  /** Subscribes to NOTIFY on `channel`; resolves to the function that unsubscribes. */
  async listen(channel: string, callback: (payload: string) => void): Promise<() => Promise<void>> {
    const listenId = this.#nextId++;
    this.#listeners.set(listenId, callback);
    try {
      await this.#call({ op: 'listen', channel }, listenId);
    } catch (err) {
      this.#listeners.delete(listenId);
      throw err;
    }
    return async () => {
      if (!this.#listeners.delete(listenId)) return;
      await this.#call({ op: 'unlisten', listenId });
    };
  }

  /** Closes PGlite (which writes what it must) and ends the worker. */
  async close(): Promise<void> {
    if (this.#stopped) return;
    try {
      await this.#call({ op: 'close' });
    } finally {
      this.#stop(stoppedError('PGlite is closed', 'CONNECTION_ENDED'));
      await this.#worker.terminate();
    }
  }

  #query<T>(tx: number | undefined, sql: string, params: unknown[], options: QueryOptions | undefined): Promise<Results<T>> {
    try {
      refuseLocalOnly(options);
      const request: Omit<QueryRequest, 'id'> = { op: 'query', sql, params: compactParams(params), rowMode: options?.rowMode ?? 'object', textOids: textOids(options) };
      if (tx !== undefined) request.tx = tx;
      if (options?.paramTypes) request.paramTypes = options.paramTypes;
      return this.#call(request) as Promise<Results<T>>;
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  #exec(tx: number | undefined, sql: string, options: QueryOptions | undefined): Promise<Results[]> {
    try {
      refuseLocalOnly(options);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    return this.#call(tx === undefined ? { op: 'exec', sql } : { op: 'exec', tx, sql }) as Promise<Results[]>;
  }

  #call(request: Outgoing, id = this.#nextId++): Promise<unknown> {
    if (this.#stopped) return Promise.reject(this.#stopped);
    return new Promise((resolve, reject) => {
      try {
        // Parameters are copied, never transferred: the caller may still use its buffers.
        this.#worker.postMessage({ ...request, id });
      } catch (err) {
        reject(err as Error); // e.g. a parameter that cannot be cloned
        return;
      }
      if (this.#pending.size === 0) this.#worker.ref(); // work in flight keeps the process up
      this.#pending.set(id, { resolve, reject });
    });
  }

  #receive(reply: Reply): void {
    if (reply.kind === 'notification') {
      this.#listeners.get(reply.listenId)?.(reply.payload);
      return;
    }
    if (reply.kind !== 'result' && reply.kind !== 'error') return;
    const pending = this.#pending.get(reply.id);
    if (!pending) return;
    this.#pending.delete(reply.id);
    if (this.#pending.size === 0) this.#worker.unref();
    if (reply.kind === 'result') pending.resolve(reply.value);
    else pending.reject(new PgliteThreadError(reply.error));
  }

  #stop(reason: Error): void {
    this.#stopped ??= reason;
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    this.#listeners.clear();
    for (const { reject } of pending) reject(this.#stopped);
  }
}
