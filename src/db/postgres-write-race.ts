/**
 * postgres.js 3.4.9 schedules a connection's buffered write with setImmediate and does not
 * cancel it when the connection closes meanwhile: the write then meets a null socket and
 * throws from a timer, which would end the process. It happens when PostgreSQL's connections
 * are reset under load (the outage benchmark hit it). The connection is already gone and its
 * queries are rejected by its close handler, so that one exception can be logged and ignored.
 */
export function isPostgresWriteAfterClose(err: unknown): boolean {
  return (
    err instanceof TypeError &&
    /reading 'write'/.test(err.message) &&
    /nextWrite/.test(err.stack ?? '') &&
    /postgres[\\/]src[\\/]connection\.js/.test(err.stack ?? '')
  );
}
