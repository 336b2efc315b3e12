// The messages between the main thread and the PGlite worker (src/db/pglite-worker.ts). Only
// structured-cloneable data crosses: functions (PGlite's type parsers) are sent by what they do.

export interface QueryRequest {
  op: 'query';
  id: number;
  /** The open transaction this statement belongs to; absent outside one. */
  tx?: number;
  sql: string;
  params: unknown[];
  rowMode: 'array' | 'object';
  /** Type OIDs whose values come back as PostgreSQL's text, unparsed (drizzle asks this for dates). */
  textOids: number[];
  paramTypes?: number[];
}

export interface ExecRequest {
  op: 'exec';
  id: number;
  tx?: number;
  sql: string;
}

export type Request =
  | QueryRequest
  | ExecRequest
  /** Opens a transaction whose id is this request's id; the worker answers once BEGIN ran. */
  | { op: 'begin'; id: number }
  /** COMMITs (or ROLLBACKs) transaction `tx`; the answer comes once PostgreSQL finished it. */
  | { op: 'end'; id: number; tx: number; commit: boolean }
  /** Notifications then arrive tagged with this request's id. */
  | { op: 'listen'; id: number; channel: string }
  | { op: 'unlisten'; id: number; listenId: number }
  | { op: 'close'; id: number };

/** The fields of PostgreSQL's ErrorResponse that PGlite puts on its DatabaseError. */
export const PG_ERROR_FIELDS = [
  'severity',
  'code',
  'detail',
  'hint',
  'position',
  'internalPosition',
  'internalQuery',
  'where',
  'schema',
  'table',
  'column',
  'dataType',
  'constraint',
  'file',
  'line',
  'routine',
  'query',
] as const;

export interface SerializedError {
  name: string;
  message: string;
  stack?: string;
  fields: Partial<Record<(typeof PG_ERROR_FIELDS)[number], string>>;
}

export type Reply =
  | { kind: 'ready' }
  | { kind: 'startFailed'; error: SerializedError }
  | { kind: 'result'; id: number; value: unknown }
  | { kind: 'error'; id: number; error: SerializedError }
  | { kind: 'notification'; listenId: number; payload: string };

/** What the worker needs to open PGlite. */
export interface WorkerData {
  /** A directory prepared by preparePgliteDataDir, or `memory://`. */
  location: string;
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
