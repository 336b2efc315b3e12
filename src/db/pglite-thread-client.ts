// The main thread's handle on PGlite running in its own worker thread (pglite-worker.ts). It offers
// the part of PGlite's API that drizzle-orm/pglite and database.ts call (query, exec, transaction,
// listen, close), so drizzle is handed this object in place of a PGlite instance. A worker that
// dies is replaced by one on the same data directory (#lost); starting one is pglite-worker-start.ts.
import type { Worker } from 'node:worker_threads';
import type { QueryOptions, Results } from '@electric-sql/pglite';
import type { Logger } from 'pino';
import { PgliteThreadError, type QueryRequest, type Reply, type Request } from './pglite-protocol.ts';
import { restartDelayMs, spawnPgliteWorker, STABLE_RUN_MS, whenReady, type SpawnWorker } from './pglite-worker-start.ts';

/** Requests as the client builds them; the id is added when sending. */
type WithoutId<R> = R extends unknown ? Omit<R, 'id'> : never;
type Outgoing = WithoutId<Request>;

interface Pending {
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
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

export interface PgliteThreadOptions {
  spawn?: SpawnWorker;
  /** Where the loss and the restart of the worker are logged. */
  logger?: Pick<Logger, 'info' | 'error'>;
}

interface Listener {
  channel: string;
  callback: (payload: string) => void;
  /** Called once a new worker listens again: notifications sent meanwhile were missed. */
  onRestart?: () => void;
}

export class PgliteThreadClient {
  #worker: Worker;
  readonly #location: string;
  readonly #spawn: SpawnWorker;
  readonly #logger: PgliteThreadOptions['logger'];
  readonly #pending = new Map<number, Pending>();
  readonly #listeners = new Map<number, Listener>();
  #nextId = 1;
  /** Set by close() (or when an in-memory database died): every later call fails with it at once. */
  #stopped: Error | null = null;
  /** Set from a worker's death until the next one is spawned: calls meanwhile fail at once. */
  #down: Error | null = null;
  /** Counts lost workers: a transaction begun under an earlier count died with its worker. */
  #epoch = 0;
  /** Why the last worker was lost: what a transaction that died with it fails with. */
  #lostReason: Error | null = null;
  /** Workers in a row that died without a stable run (restartDelayMs). */
  #failures = 0;
  #readyAt = performance.now();
  #restartTimer: NodeJS.Timeout | null = null;

  private constructor(worker: Worker, location: string, options: PgliteThreadOptions) {
    this.#worker = worker;
    this.#location = location;
    this.#spawn = options.spawn ?? spawnPgliteWorker;
    this.#logger = options.logger;
    this.#attach(worker);
  }

  /** Starts the worker and opens PGlite at `location` (see preparePgliteDataDir) inside it. */
  static async start(location: string, options: PgliteThreadOptions = {}): Promise<PgliteThreadClient> {
    const worker = (options.spawn ?? spawnPgliteWorker)({ location });
    await whenReady(worker, location);
    return new PgliteThreadClient(worker, location, options);
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
    const epoch = this.#epoch;
    await this.#call({ op: 'begin' }, txId);
    let closed = false;
    // A transaction whose worker died is gone with it: its statements fail with the worker's
    // error, and there is nothing left to roll back.
    const lost = () => (this.#epoch === epoch ? null : this.#lostReason);
    const end = async (commit: boolean) => {
      if (closed) return;
      closed = true;
      const gone = lost();
      if (gone && commit) throw gone;
      if (gone) return;
      await this.#call({ op: 'end', tx: txId, commit });
    };
    const tx: ThreadTransaction = {
      query: (sql, params = [], options) => {
        const gone = lost();
        return gone ? Promise.reject(gone) : this.#query(txId, sql, params, options);
      },
      exec: (sql, options?: QueryOptions) => {
        const gone = lost();
        return gone ? Promise.reject(gone) : this.#exec(txId, sql, options);
      },
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

  /**
   * Subscribes to NOTIFY on `channel`; resolves to the function that unsubscribes. A worker that
   * replaces a dead one listens again, then calls `onRestart`.
   */
  async listen(channel: string, callback: (payload: string) => void, onRestart?: () => void): Promise<() => Promise<void>> {
    const listenId = this.#nextId++;
    this.#listeners.set(listenId, { channel, callback, ...(onRestart ? { onRestart } : {}) });
    try {
      await this.#call({ op: 'listen', channel }, listenId);
    } catch (err) {
      this.#listeners.delete(listenId);
      throw err;
    }
    return async () => {
      if (!this.#listeners.delete(listenId)) return;
      // Without a worker there is no subscription left to end; the next one will not make it.
      if (this.#down || this.#stopped) return;
      await this.#call({ op: 'unlisten', listenId });
    };
  }

  /** Closes PGlite (which writes what it must) and ends the worker. */
  async close(): Promise<void> {
    if (this.#stopped) return;
    if (this.#restartTimer) clearTimeout(this.#restartTimer);
    if (this.#down) {
      this.#stop(stoppedError('PGlite is closed', 'CONNECTION_ENDED'));
      return;
    }
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
    const unavailable = this.#stopped ?? this.#down;
    if (unavailable) return Promise.reject(unavailable);
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

  /** Routes a worker's replies, and treats its end (not one close() asked for) as a crash. */
  #attach(worker: Worker): void {
    let dead = false;
    const died = (reason: Error) => {
      if (dead || worker !== this.#worker) return;
      dead = true;
      this.#lost(reason);
    };
    worker.on('message', (reply: Reply) => {
      if (worker === this.#worker) this.#receive(reply);
    });
    worker.on('error', (err) => died(stoppedError(`PGlite's worker thread failed: ${err.message}`, 'CONNECTION_CLOSED', err)));
    worker.on('exit', (code) => died(stoppedError(`PGlite's worker thread stopped (exit code ${code})`, 'CONNECTION_CLOSED')));
    // Idle, the worker holds the process no more than PGlite on the main thread did.
    worker.unref();
  }

  #receive(reply: Reply): void {
    if (reply.kind === 'notification') {
      this.#listeners.get(reply.listenId)?.callback(reply.payload);
      return;
    }
    if (reply.kind === 'ready') return this.#restarted();
    if (reply.kind !== 'result' && reply.kind !== 'error') return;
    const pending = this.#pending.get(reply.id);
    if (!pending) return;
    this.#pending.delete(reply.id);
    if (this.#pending.size === 0) this.#worker.unref();
    if (reply.kind === 'result') pending.resolve(reply.value);
    else pending.reject(new PgliteThreadError(reply.error));
  }

  /**
   * The worker died (an uncaught error, out of memory, terminated): what it was running fails
   * with a connection error (503 database_unavailable), and a new worker opens the same data
   * directory, at once the first time and later after a growing pause (restartDelayMs).
   */
  #lost(reason: Error): void {
    if (this.#stopped) return; // close() ended it
    this.#epoch++;
    if (this.#location === 'memory://') {
      // Its data lived in the dead thread's memory: a new one would be an empty database.
      this.#stop(stoppedError(`${reason.message}; its in-memory database is gone, restart Troupe`, 'CONNECTION_CLOSED', reason));
      this.#lostReason = this.#stopped;
      return;
    }
    if (performance.now() - this.#readyAt >= STABLE_RUN_MS) this.#failures = 0;
    this.#failures++;
    const delayMs = restartDelayMs(this.#failures);
    this.#down = stoppedError(`${reason.message}; a new one is starting, try again shortly`, 'CONNECTION_CLOSED', reason);
    this.#lostReason = this.#down;
    this.#failPending(this.#down);
    this.#logger?.error({ err: reason, location: this.#location, attempt: this.#failures, restartInMs: delayMs }, "PGlite's worker thread died; starting a new one on the same data directory");
    this.#restartTimer = setTimeout(() => this.#respawn(), delayMs);
    this.#restartTimer.unref();
  }

  /** Starts the replacement; calls made from now on wait in its queue until PGlite is open. */
  #respawn(): void {
    this.#restartTimer = null;
    let worker: Worker;
    try {
      worker = this.#spawn({ location: this.#location });
    } catch (err) {
      this.#down = null; // #lost sets it again with this error
      return this.#lost(stoppedError(`PGlite's worker thread could not start: ${(err as Error).message}`, 'CONNECTION_CLOSED', err as Error));
    }
    this.#worker = worker;
    this.#down = null;
    this.#attach(worker);
    for (const [listenId, listener] of this.#listeners) {
      this.#call({ op: 'listen', channel: listener.channel }, listenId).then(
        () => listener.onRestart?.(),
        () => {}, // this worker died too: the next one listens again
      );
    }
  }

  #restarted(): void {
    this.#readyAt = performance.now();
    this.#logger?.info({ location: this.#location, attempt: this.#failures }, "PGlite's worker thread restarted");
  }

  #failPending(reason: Error): void {
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const { reject } of pending) reject(reason);
  }

  #stop(reason: Error): void {
    this.#stopped ??= reason;
    this.#listeners.clear();
    this.#failPending(this.#stopped);
  }
}
