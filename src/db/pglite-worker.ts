// PGlite's own thread. PostgreSQL compiled to WebAssembly runs synchronously on the thread that
// calls it (and PGlite encodes a 50 MB bytea parameter as hex in JavaScript), so on the main
// thread one long statement froze the HTTP server for seconds; here it only occupies this thread.
// The main thread's side is pglite-thread-client.ts; the messages are in pglite-protocol.ts.
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite, type Transaction } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { releaseStartupMemory } from '../observability/startup-memory.ts';
import { keepWasmBaselineCompiled, PGLITE_START_PARAMS } from './pglite-memory.ts';
import { readPgliteTemplate } from './pglite-template.ts';
import { PG_ERROR_FIELDS, type Reply, type Request, type SerializedError, type WorkerData } from './pglite-protocol.ts';

/** Below this, copying a bytea result is cheaper than giving its memory away. */
const TRANSFER_MIN_BYTES = 64 * 1024;
const BYTEA = 17;

/**
 * PGlite's own bytea codec goes through one JavaScript string per byte (seconds for 50 MB);
 * Buffer's hex codec is native. Same text format, same Uint8Array values. Upload parts skip it
 * (they travel as base64, see insertCopyRows); any other bytea value, and reads of the column, use it.
 */
const byteaCodec = {
  serializers: {
    [BYTEA]: (value: unknown) => {
      if (!(value instanceof Uint8Array)) throw new Error('Invalid input for bytea type');
      return `\\x${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('hex')}`;
    },
  },
  parsers: {
    [BYTEA]: (text: string) => {
      const bytes = Buffer.from(text.slice(2), 'hex');
      return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    },
  },
};

interface OpenTransaction {
  tx: Transaction;
  /** Lets PGlite's transaction callback return: true commits, false rolls back. */
  end: (commit: boolean) => void;
  /** Settles once COMMIT or ROLLBACK ran (rejects when PGlite failed to end it). */
  settled: Promise<void>;
}

if (!parentPort) throw new Error('pglite-worker.ts runs as a worker thread: open it through pglite-thread-client.ts');
const port = parentPort;
const { location } = workerData as WorkerData;

function post(reply: Reply, transfer: ArrayBuffer[] = []): void {
  port.postMessage(reply, transfer);
}

function serializeError(err: unknown): SerializedError {
  if (!(err instanceof Error)) return { name: 'Error', message: String(err), fields: {} };
  const fields: SerializedError['fields'] = {};
  for (const key of PG_ERROR_FIELDS) {
    const value: unknown = (err as unknown as Record<string, unknown>)[key];
    if (typeof value === 'string') fields[key] = value;
  }
  return { name: err.name, message: err.message, stack: err.stack, fields };
}

// The flags are process-wide, but set here too so that this thread never compiles PGlite
// without them, whoever started it (pglite-memory.ts says why they matter).
keepWasmBaselineCompiled();
let pg: PGlite;
try {
  // pgvector ships with PGlite's extension bundle, so embedded installs always have vector search.
  // A store in memory starts from the empty-cluster template when there is one (pglite-template.ts):
  // a quarter of initdb's time and half its memory.
  const template = location === 'memory://' ? await readPgliteTemplate() : undefined;
  pg = await PGlite.create(location, { extensions: { vector }, startParams: PGLITE_START_PARAMS, ...byteaCodec, ...(template ? { loadDataDir: template } : {}) });
} catch (err) {
  post({ kind: 'startFailed', error: serializeError(err) });
  port.close();
  throw err;
}

const transactions = new Map<number, OpenTransaction>();
const unlisteners = new Map<number, () => Promise<void>>();
const asText = (value: string): string => value;

function target(tx: number | undefined): PGlite | Transaction {
  if (tx === undefined) return pg;
  const open = transactions.get(tx);
  if (!open) throw new Error(`PGlite transaction ${tx} is not open (it was committed or rolled back)`);
  return open.tx;
}

/** Opens a transaction and answers once BEGIN ran; PGlite keeps other statements waiting until it ends. */
async function begin(id: number): Promise<void> {
  let opened!: (tx: Transaction) => void;
  const isOpen = new Promise<Transaction>((resolve) => (opened = resolve));
  let end!: (commit: boolean) => void;
  const decided = new Promise<boolean>((resolve) => (end = resolve));
  const settled = pg.transaction(async (tx) => {
    opened(tx);
    if (!(await decided)) await tx.rollback();
  });
  // When BEGIN itself fails, `settled` rejects before the transaction ever opened.
  const tx = await Promise.race([isOpen, settled.then(() => Promise.reject(new Error('PGlite ended a transaction before it began')))]);
  transactions.set(id, { tx, end, settled });
}

async function finish(txId: number, commit: boolean): Promise<void> {
  const open = transactions.get(txId);
  if (!open) throw new Error(`PGlite transaction ${txId} is not open (it was committed or rolled back)`);
  transactions.delete(txId);
  open.end(commit);
  await open.settled;
}

/** Result memory of large bytea values moves to the main thread instead of being copied. */
function transferables(rows: unknown[]): ArrayBuffer[] {
  const buffers = new Set<ArrayBuffer>();
  const visit = (value: unknown) => {
    if (value instanceof Uint8Array && value.byteLength >= TRANSFER_MIN_BYTES && value.buffer instanceof ArrayBuffer) {
      if (value.byteOffset === 0 && value.byteLength === value.buffer.byteLength) buffers.add(value.buffer);
    }
  };
  for (const row of rows) {
    if (Array.isArray(row)) row.forEach(visit);
    else if (row && typeof row === 'object') Object.values(row).forEach(visit);
  }
  return [...buffers];
}

async function handle(request: Request): Promise<{ value: unknown; transfer?: ArrayBuffer[] }> {
  switch (request.op) {
    case 'query': {
      const parsers = Object.fromEntries(request.textOids.map((oid) => [oid, asText]));
      const options = { rowMode: request.rowMode, parsers, ...(request.paramTypes ? { paramTypes: request.paramTypes } : {}) };
      const result = await target(request.tx).query(request.sql, request.params, options);
      const hasBytes = result.fields.some((field) => field.dataTypeID === BYTEA);
      return { value: result, transfer: hasBytes ? transferables(result.rows) : [] };
    }
    case 'exec':
      return { value: await target(request.tx).exec(request.sql) };
    case 'begin':
      return { value: await begin(request.id) };
    case 'end':
      return { value: await finish(request.tx, request.commit) };
    case 'listen': {
      const { id } = request;
      unlisteners.set(id, await pg.listen(request.channel, (payload) => post({ kind: 'notification', listenId: id, payload })));
      return { value: undefined };
    }
    case 'unlisten': {
      const unlisten = unlisteners.get(request.listenId);
      unlisteners.delete(request.listenId);
      return { value: await unlisten?.() };
    }
    case 'close':
      await pg.close();
      return { value: undefined };
  }
}

port.on('message', async (request: Request) => {
  try {
    const { value, transfer } = await handle(request);
    post({ kind: 'result', id: request.id, value }, transfer);
  } catch (err) {
    // Also when the result cannot be cloned: the caller gets an error, never silence.
    post({ kind: 'error', id: request.id, error: serializeError(err) });
  }
});
// Opening PGlite leaves this thread's heap holding its loading garbage (tens of MB); the main
// thread's release after start-up covers only its own heap.
releaseStartupMemory();
post({ kind: 'ready' });
