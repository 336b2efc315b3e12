import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import postgres from 'postgres';
import { afterEach, describe, expect, it } from 'vitest';
import { POSTGRES_URL } from '../support/env.ts';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.ts';

/** A bound on a wait that must not hang, with room for a loaded machine; not a speed target. */
const PROMPTLY_MS = 6_000;

/** Every pool here: reconnect at once, and give up connecting within 2 s rather than 30. */
const POOL = { onnotice: () => {}, connect_timeout: 2, backoff: () => 0.05 };

const settled = <T>(work: PromiseLike<T>): Promise<string> =>
  Promise.race([
    Promise.resolve(work).then(
      () => 'ok',
      (err: { code?: string }) => err.code ?? 'error',
    ),
    new Promise<string>((resolve) => setTimeout(resolve, PROMPTLY_MS, 'still pending')),
  ]);

/**
 * postgres.js as Troupe installs it (src/db/postgres-driver-patch.ts) on a real server, when a
 * connection's socket closes at the moments the released driver mishandles. This is the driver's
 * behaviour, so it runs on PostgreSQL only; PGlite does not use postgres.js.
 */
describe.skipIf(!POSTGRES_URL)('postgres.js when a connection closes under it', () => {
  const clients: postgres.Sql[] = [];
  let proxy: FaultProxy | undefined;
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((sql) => sql.end({ timeout: 1 })));
    await proxy?.close();
    proxy = undefined;
  });

  /** A one-connection pool whose sockets the test holds, to close one at a chosen moment. */
  const ownSockets = (): { sql: postgres.Sql; sockets: Socket[] } => {
    const { hostname, port } = new URL(POSTGRES_URL as string);
    const sockets: Socket[] = [];
    // `socket` is a documented option (postgres.js README, "Custom socket") its types leave out.
    const options = {
      ...POOL,
      max: 1,
      socket: () => {
        const socket = connect(Number(port || 5432), hostname);
        sockets.push(socket);
        return socket;
      },
    };
    const sql = postgres(POSTGRES_URL as string, options);
    clients.push(sql);
    return { sql, sockets };
  };

  it('connects again at once after its socket closed with a write buffered', async () => {
    const { sql, sockets } = ownSockets();
    await sql`select 1`;
    // Inside an immediate, the query's buffered write waits for the next loop turn, so the
    // socket's close callback runs first: the released driver then never writes again and the
    // next query fails on connect_timeout.
    const cut = await new Promise<Promise<string>>((resolve) =>
      setImmediate(() => {
        const query = sql`select 2`;
        sockets.at(-1)?.destroy();
        resolve(settled(query));
      }),
    );
    expect(await cut).toBe('CONNECTION_CLOSED');
    expect(await settled(sql`select 3`)).toBe('ok');
  });

  it('fails a transaction statement sent after the close, rather than throwing from a timer', async () => {
    const { sql, sockets } = ownSockets();
    const transaction = sql.begin(async (tx) => {
      await tx`select 1`;
      const socket = sockets.at(-1) as Socket;
      socket.destroy();
      await once(socket, 'close');
      await tx`select 2`;
    });
    expect(await settled(transaction)).toBe('CONNECTION_CLOSED');
    expect(await settled(sql`select 3`)).toBe('ok');
  });

  it('settles every query handed to a connection between its socket error and close', async () => {
    const { hostname, port } = new URL(POSTGRES_URL as string);
    proxy = await startFaultProxy({ host: hostname, port: Number(port || 5432) });
    const application = `driver-close-${process.pid}-${Date.now()}`;
    const sql = postgres(proxy.via(POSTGRES_URL as string), { ...POOL, max: 2, connection: { application_name: application } });
    const admin = postgres(POSTGRES_URL as string, { max: 1, onnotice: () => {} });
    clients.push(sql, admin);
    await Promise.all([sql`select 1`, sql`select 1`]);
    const retries: Promise<string>[] = [];
    // A caller that retries as soon as its query fails, as a request handler does: the retry
    // reaches a connection whose socket has failed but not yet closed.
    const busy = [1, 2].map(() =>
      sql`select pg_sleep(30)`.catch((err: { code?: string }) => {
        retries.push(settled(sql`select 1`));
        return err.code;
      }),
    );
    const sleeping = async (): Promise<number> => {
      const [row] = await admin<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
        where application_name = ${application} and query like 'select pg_sleep%'`;
      return row?.n ?? 0;
    };
    while ((await sleeping()) < 2); // both connections are busy on the server
    await proxy.cut('reset');
    expect(await Promise.all(busy)).toEqual(['ECONNRESET', 'ECONNRESET']);
    for (const outcome of await Promise.all(retries)) expect(['CONNECTION_CLOSED', 'ECONNRESET']).toContain(outcome);
    await proxy.restore();
    expect(await settled(sql`select 1`)).toBe('ok');
  });
});
