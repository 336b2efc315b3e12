// Deadlines on postgres.js queries. postgres.js has no acquire timeout: while its connections
// are (re)connecting, queries wait in its queue, and each failed connection attempt fails only
// the one query that started it, so a query queued behind others waits several connect
// timeouts. Neither does it bound a query whose connection went silent (a cut network answers
// nothing, and statement_timeout is enforced by the server it cannot reach).
//
// The wrapper gives drizzle a client whose queries fail with a connection-level error (mapped to
// 503 database_unavailable in errors.ts) when they have waited `acquireMs` for a connection, or
// run `runMs` past that. A query that never reached a connection never runs: it is taken out of
// postgres.js' queue, and a transaction whose turn comes after its caller gave up rolls back
// before its body runs, so a request answered 503 changes nothing.
import type { Sql } from 'postgres';

/** The code of a query that waited too long for a connection. */
export const ACQUIRE_TIMEOUT = 'ACQUIRE_TIMEOUT';
/** The code of a query that ran too long on a connection that no longer answers. */
export const QUERY_DEADLINE = 'QUERY_DEADLINE';

export interface QueryDeadlines {
  /** Longest wait for a connection. */
  acquireMs: number;
  /** Longest run once sent; above the server's statement_timeout, so it only fires on a dead link. */
  runMs: number;
}

/**
 * The parts of a postgres.js query this relies on: `state` is set when the query is handed to a
 * connection, `reject` settles it (the connection calls it too), `cancel()` takes a queued query
 * out of the pool's queue or asks the server to cancel a running one.
 */
interface PendingQuery {
  state: unknown;
  reject: (err: unknown) => void;
  resolve: (value: unknown) => void;
  cancel(): unknown;
}

class DeadlineError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = 'DeadlineError';
    this.code = code;
  }
}

/** Wraps a postgres.js client so every query and transaction it starts is bounded. */
export function withQueryDeadlines(client: Sql, deadlines: QueryDeadlines): Sql {
  return new Proxy(client, {
    get(target, property, receiver) {
      if (property === 'unsafe') return boundedUnsafe(target, deadlines);
      if (property === 'begin') return boundedBegin(target, deadlines);
      return Reflect.get(target, property, receiver) as unknown;
    },
  });
}

function boundedUnsafe(client: Sql, deadlines: QueryDeadlines): Sql['unsafe'] {
  return ((...args: Parameters<Sql['unsafe']>) => {
    const query = client.unsafe(...args);
    armDeadlines(query as unknown as PendingQuery, deadlines);
    return query;
  }) as Sql['unsafe'];
}

function armDeadlines(query: PendingQuery, deadlines: QueryDeadlines): void {
  const { resolve, reject } = query;
  let timer: NodeJS.Timeout | undefined;
  const fail = (code: string, message: string) => {
    reject(new DeadlineError(code, message));
    // A queued query leaves the queue (never to run); a sent one is cancelled on the server.
    Promise.resolve(query.cancel()).catch(() => {});
  };
  const onAcquireDeadline = () => {
    if (query.state === null) {
      fail(ACQUIRE_TIMEOUT, `No database connection became free within ${deadlines.acquireMs} ms.`);
      return;
    }
    timer = setTimeout(() => fail(QUERY_DEADLINE, `The database did not answer a query within ${deadlines.acquireMs + deadlines.runMs} ms.`), deadlines.runMs);
    timer.unref();
  };
  timer = setTimeout(onAcquireDeadline, deadlines.acquireMs);
  timer.unref();
  query.resolve = (value) => {
    clearTimeout(timer);
    resolve(value);
  };
  query.reject = (err) => {
    clearTimeout(timer);
    reject(err);
  };
}

function boundedBegin(client: Sql, deadlines: QueryDeadlines): Sql['begin'] {
  return ((...args: unknown[]) => {
    const body = args[args.length - 1] as (tx: Sql) => unknown;
    const options = args.length > 1 ? (args[0] as string) : '';
    let expired = false;
    let started = false;
    return new Promise<unknown>((resolve, reject) => {
      const giveUp = (code: string, message: string) => {
        expired = true;
        reject(new DeadlineError(code, message));
      };
      let timer = setTimeout(() => {
        if (!started) giveUp(ACQUIRE_TIMEOUT, `No database connection became free for a transaction within ${deadlines.acquireMs} ms.`);
      }, deadlines.acquireMs);
      timer.unref();
      const run = async (tx: Sql) => {
        // The caller was already told the database is unavailable: roll back without running.
        if (expired) throw new DeadlineError(ACQUIRE_TIMEOUT, 'The transaction started after its caller gave up.');
        started = true;
        clearTimeout(timer);
        try {
          const result = await body(withQueryDeadlines(tx, deadlines));
          // COMMIT on a link that went silent would hang: bound it, though its outcome is then unknown.
          timer = setTimeout(() => giveUp(QUERY_DEADLINE, 'The database stopped answering during COMMIT; the change may or may not be saved.'), deadlines.runMs);
          timer.unref();
          return result;
        } catch (err) {
          // A statement past its deadline: answer now; the ROLLBACK postgres.js sends next may hang on the same dead link.
          const deadline = deadlineIn(err);
          if (deadline) giveUp(deadline.code, deadline.message);
          throw err;
        }
      };
      (client.begin(options, run as never) as Promise<unknown>).then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
    });
  }) as Sql['begin'];
}

/** The deadline error behind a thrown value, seen through drizzle's wrapper. */
function deadlineIn(err: unknown): DeadlineError | null {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e instanceof DeadlineError) return e;
  }
  return null;
}
