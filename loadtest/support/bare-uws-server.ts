/**
 * Baseline: the smallest uWebSockets.js server that answers every GET with the JSON body in
 * BENCH_BODY (the benchmark passes the real Character JSON, so both send the same bytes).
 * Run with a Node that can load uWS (see .ci/uws-node.sh). Listens on 127.0.0.1 and an ephemeral
 * port unless BENCH_PORT is set; prints `{"msg":"bare listening","engine":"uws","port":N}`.
 */
import uWS from 'uWebSockets.js';

const body = process.env.BENCH_BODY ?? '{}';
const port = Number(process.env.BENCH_PORT ?? 0);

const app = uWS.App();
app.get('/*', (res) => {
  // Synchronous reply inside the handler: uWS corks it already.
  res.writeHeader('content-type', 'application/json; charset=utf-8');
  res.end(body);
});
app.any('/*', (res) => {
  res.writeStatus('405 Method Not Allowed');
  res.end();
});

app.listen('127.0.0.1', port, (socket) => {
  if (!socket) {
    process.stderr.write(`bare uWS server could not listen on 127.0.0.1:${port}\n`);
    process.exit(1);
  }
  const stop = () => {
    uWS.us_listen_socket_close(socket);
    app.close();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdout.write(
    `${JSON.stringify({ msg: 'bare listening', engine: 'uws', port: uWS.us_socket_local_port(socket) })}\n`,
  );
});
