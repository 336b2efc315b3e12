import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Invalidations } from '../cache/invalidations.ts';
import type { Database, Unlisten } from '../db/database.ts';
import { isDatabaseUnavailable } from '../errors.ts';
import type { DocumentIndex } from '../retrieval/document-index.ts';
import type { Embedder } from '../retrieval/embeddings.ts';
import { runChunkWrites, type ChunkWrite } from '../retrieval/chunk-write-pipeline.ts';
import type { ParserPool } from '../../workers/parser-pool.ts';
import { documentStep, type DocumentEvent } from '../../machines/document-status.ts';
import { lockNextQueued, lockOwned, readContent, removeStaleUploads, renewLease, setStatus, takeLease, type QueuedDocument } from './repository.ts';
import { DOCUMENTS_CHANNEL } from './service.ts';

export interface ProcessorOptions {
  /** Documents processed at once by this process. */
  concurrency: number;
  /** A worker renews its claim on a document every third of this; a dead worker's claim expires after it. */
  leaseMs: number;
  /** How often the queue is checked without a wake-up (other processes' expired leases). */
  pollMs: number;
  /** Processing runs a document may start (interrupted by dying processes or a database that stopped answering) before it fails. */
  maxAttempts: number;
  chunking: { maxTokens: number; overlapTokens: number };
}

export interface ProcessorDeps {
  database: Database;
  invalidations: Invalidations;
  pool: ParserPool;
  embedder: Embedder;
  index: DocumentIndex;
  logger: Logger;
  options: ProcessorOptions;
}

/** A document this process finished: `ready` or `failed`. */
export interface SettledEvent {
  documentId: string;
  status: 'ready' | 'failed';
}

/** An upload that stored no part for this long was left by a process that stopped. */
const STALE_UPLOAD_MS = 10 * 60_000;
const STALE_UPLOAD_SWEEP_MS = 60_000;
/** First pause before asking again to queue a document whose processing lost the database; doubles up to a third of the lease. */
const REQUEUE_FIRST_PAUSE_MS = 100;

type Outcome = { event: 'succeed'; chunkCount: number; writes: ChunkWrite[] } | { event: 'fail'; error: string };

/**
 * The durable document queue's consumer. Documents wait in PostgreSQL; each process claims
 * them with `FOR UPDATE SKIP LOCKED` and a lease it keeps renewing, so a document is processed
 * by one process at a time, and one whose process died is taken up again when its lease runs
 * out. Results are written only while the claim still holds (not deleted, reprocessed or taken
 * over), and chunks are replaced, never appended: processing twice leaves no duplicates.
 */
export class DocumentProcessor {
  readonly #deps: ProcessorDeps;
  readonly #owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  readonly #running = new Map<string, { controller: AbortController; done: Promise<void> }>();
  #claiming = false;
  #stopped = false;
  #unlisten: Unlisten | null = null;
  #poll: NodeJS.Timeout | null = null;
  #sweptAt = 0;
  readonly #settled = new Set<(event: SettledEvent) => void>();
  readonly #discarded = new Set<(event: { documentId: string }) => void>();

  constructor(deps: ProcessorDeps) {
    this.#deps = deps;
  }

  async start(): Promise<void> {
    const wake = () => this.wake();
    this.#unlisten = await this.#deps.database.listen(DOCUMENTS_CHANNEL, wake, wake);
    this.#poll = setInterval(wake, this.#deps.options.pollMs);
    this.#poll.unref();
    this.wake();
  }

  /** Claims documents while there is room; called on NOTIFY, on a timer and when work ends. */
  wake(): void {
    if (this.#claiming || this.#stopped) return;
    this.#claiming = true;
    void this.#claimWhileRoom().finally(() => {
      this.#claiming = false;
    });
  }

  /** Calls `listener` for each document this process finishes; returns the unsubscribe. */
  onSettled(listener: (event: SettledEvent) => void): () => void {
    this.#settled.add(listener);
    return () => this.#settled.delete(listener);
  }

  /** Calls `listener` when this process drops its work on a document (deleted, reprocessed, taken over). */
  onDiscarded(listener: (event: { documentId: string }) => void): () => void {
    this.#discarded.add(listener);
    return () => this.#discarded.delete(listener);
  }

  /** Stops work on a document this process is processing (it was deleted or reprocessed). */
  cancel(documentId: string): void {
    this.#running.get(documentId)?.controller.abort();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#poll) clearInterval(this.#poll);
    await this.#unlisten?.();
    // Interrupted work is taken up again (here after a restart, or by another process) once
    // its lease expires.
    for (const { controller } of this.#running.values()) controller.abort();
    await Promise.all([...this.#running.values()].map((r) => r.done));
  }

  async #claimWhileRoom(): Promise<void> {
    const { options, logger } = this.#deps;
    try {
      await this.#removeStaleUploads();
      while (!this.#stopped && this.#running.size < options.concurrency) {
        const claimed = await this.#claim();
        if (!claimed) return;
        const controller = new AbortController();
        const done = this.#process(claimed, controller.signal).finally(() => {
          this.#running.delete(claimed.id);
          this.wake();
        });
        this.#running.set(claimed.id, { controller, done });
      }
    } catch (err) {
      if (!this.#stopped) logger.error({ err }, 'claiming documents failed');
    }
  }

  /** At most once a minute: uploads whose process died half-way (documents the uploader never got). */
  async #removeStaleUploads(): Promise<void> {
    const now = Date.now();
    if (now - this.#sweptAt < STALE_UPLOAD_SWEEP_MS) return;
    this.#sweptAt = now;
    const removed = await removeStaleUploads(this.#deps.database.db, STALE_UPLOAD_MS);
    if (removed > 0) this.#deps.logger.warn({ removed }, 'removed uploads left unfinished by a process that stopped');
  }

  async #claim(): Promise<QueuedDocument | null> {
    const { database, options } = this.#deps;
    for (;;) {
      const result = await database.db.transaction(async (tx) => {
        const next = await lockNextQueued(tx);
        if (!next) return null;
        if (!documentStep(next.status, { type: 'claim' }).accepted) return 'skip' as const;
        if (next.attempts >= options.maxAttempts) {
          await setStatus(tx, next.id, {
            status: 'failed',
            errorMessage: `Processing was interrupted ${next.attempts} times before it finished (the server handling it stopped, or the database did not answer). Reprocess the document to try again.`,
          });
          return 'skip' as const;
        }
        await takeLease(tx, next.id, this.#owner, options.leaseMs);
        return next;
      });
      if (result !== 'skip') return result;
    }
  }

  async #process(doc: QueuedDocument, signal: AbortSignal): Promise<void> {
    const { database, options, logger } = this.#deps;
    const started = performance.now();
    const renew = setInterval(() => {
      renewLease(database.db, doc.id, this.#owner, doc.generation, options.leaseMs).then(
        (held) => held || this.cancel(doc.id),
        (err: unknown) => logger.warn({ err, documentId: doc.id }, 'could not renew a document lease'),
      );
    }, options.leaseMs / 3);
    const discard = () => {
      for (const listener of this.#discarded) listener({ documentId: doc.id });
    };
    try {
      const outcome = await this.#run(doc, signal);
      if (signal.aborted) return discard();
      const finished = await this.#finish(doc, outcome, signal);
      if (!finished) discard();
      else {
        const status = outcome.event === 'succeed' ? 'ready' : 'failed';
        this.#tellSettled({ documentId: doc.id, status });
        if (status === 'ready') {
          this.#deps.index
            .afterWrite({ characterId: doc.characterId })
            .catch((err: unknown) => logger.warn({ err, documentId: doc.id }, 'index upkeep after a ready document failed; searches go on through the shared indexes'));
        }
        logger.info(
          { documentId: doc.id, status: outcome.event === 'succeed' ? 'ready' : 'failed', ms: Math.round(performance.now() - started) },
          'document processed',
        );
      }
    } catch (err) {
      if (signal.aborted) return discard();
      if (isDatabaseUnavailable(err)) {
        logger.warn({ err, documentId: doc.id }, 'document processing lost the database; the document is queued again');
        const requeued = await this.#requeue(doc, signal).catch((requeueErr: unknown) => {
          logger.error({ err: requeueErr, documentId: doc.id }, 'could not queue a document again; it is taken up when its lease runs out');
          return false;
        });
        if (!requeued) discard();
        return;
      }
      logger.error({ err, documentId: doc.id }, 'document processing failed');
      const failed = await this.#finish(doc, { event: 'fail', error: 'Processing failed unexpectedly. Reprocess the document to try again.' }).catch(() => false);
      // Finished here too: whoever waits on the document learns it failed.
      if (failed) this.#tellSettled({ documentId: doc.id, status: 'failed' });
    } finally {
      clearInterval(renew);
    }
  }

  /**
   * The database stopped answering mid-way (PGlite's worker thread died and a new one is
   * starting; PostgreSQL unreachable): the document was not at fault, so it goes back to the
   * queue, `pending`, once the database answers again, asking with a growing pause meanwhile
   * (the lease is renewed as usual). The claim counted an attempt, so a document that keeps
   * losing the database fails after maxAttempts; if this process stops first, the lease runs
   * out and any process takes the document up. False when the claim was lost meanwhile.
   */
  async #requeue(doc: QueuedDocument, signal: AbortSignal): Promise<boolean> {
    const { database, options } = this.#deps;
    for (let pause = REQUEUE_FIRST_PAUSE_MS; !this.#stopped && !signal.aborted; pause = Math.min(pause * 2, options.leaseMs / 3)) {
      try {
        return await database.db.transaction(async (tx) => {
          const owned = await lockOwned(tx, doc.id, this.#owner, doc.generation);
          if (!owned || !documentStep(owned.status, { type: 'retry' }).accepted) return false;
          await setStatus(tx, doc.id, { status: 'pending' });
          return true;
        });
      } catch (err) {
        if (!isDatabaseUnavailable(err)) throw err;
      }
      await sleep(pause, undefined, { signal }).catch(() => {}); // aborted: the loop ends
    }
    return false;
  }

  /** Parse, chunk and embed: everything that does not write. */
  async #run(doc: QueuedDocument, signal: AbortSignal): Promise<Outcome> {
    const { database, pool, embedder, index, options } = this.#deps;
    const bytes = await readContent(database.db, doc.id);
    if (!bytes) return { event: 'fail', error: 'The document has no stored content.' };
    // Parsed and chunked in the worker pool: none of it runs on this thread.
    const extracted = await pool.extract(bytes, doc.mimeType as Parameters<ParserPool['extract']>[1], options.chunking, signal);
    if (!extracted.ok) return { event: 'fail', error: extracted.error };
    const { chunks } = extracted;
    if (chunks.length === 0) {
      return { event: 'fail', error: doc.mimeType.startsWith('image/') ? 'No text was recognised in the image.' : 'The document contains no text.' };
    }
    let embeddings: number[][] | null = null;
    if (index.vectors && embedder.configured) {
      try {
        embeddings = await embedder.embed(chunks, signal);
      } catch (err) {
        if (signal.aborted) throw err;
        return { event: 'fail', error: `The embeddings server failed (${(err as Error).message}). Reprocess the document to try again.` };
      }
    }
    return {
      event: 'succeed',
      chunkCount: chunks.length,
      writes: index.chunkWrites({ id: doc.id, projectId: doc.projectId, characterId: doc.characterId }, chunks, embeddings),
    };
  }

  #tellSettled(event: SettledEvent): void {
    for (const listener of this.#settled) listener(event);
  }

  /** Writes the outcome if the claim still holds; false when it was discarded. */
  async #finish(doc: QueuedDocument, outcome: Outcome, signal?: AbortSignal): Promise<boolean> {
    const { database, invalidations, index } = this.#deps;
    if (outcome.event === 'succeed' && !(await this.#writeChunks(doc, outcome.writes, signal))) return false;
    const finished = await database.db.transaction(async (tx) => {
      const owned = await lockOwned(tx, doc.id, this.#owner, doc.generation);
      const event: DocumentEvent = { type: outcome.event };
      if (!owned || !documentStep(owned.status, event).accepted) return false;
      if (outcome.event === 'succeed') {
        await setStatus(tx, doc.id, { status: 'ready', chunkCount: outcome.chunkCount, errorMessage: null });
        // Every process's "does this character have documents" cache learns it on commit.
        await invalidations.publish(tx, 'characterDocuments', [doc.characterId]);
      } else {
        // Chunks a write left half-way (it failed) are never searched, and would only take room.
        await index.removeDocument(tx, doc.id);
        await setStatus(tx, doc.id, { status: 'failed', chunkCount: 0, errorMessage: outcome.error });
      }
      return true;
    });
    if (finished) invalidations.applyLocal('characterDocuments', [doc.characterId]);
    return finished;
  }

  /**
   * One transaction per step (a block of chunks), each while the claim holds. On PGlite every
   * statement waits for the open transaction, so one for a whole 50 MB document held every other
   * request for 10-30 s. The document stays `processing`, which retrieval never reads, until
   * #finish makes it ready; a process dying in between leaves a claim that expires, and the
   * next run starts by removing what this one wrote.
   */
  async #writeChunks(doc: QueuedDocument, writes: ChunkWrite[], signal: AbortSignal | undefined): Promise<boolean> {
    // The rows are built outside the transactions (on PGlite one holds every other statement),
    // the next step's while this one runs.
    return runChunkWrites(writes, async (write) => {
      if (signal?.aborted) return false;
      return this.#deps.database.db.transaction(async (tx) => {
        if (!(await lockOwned(tx, doc.id, this.#owner, doc.generation))) return false;
        await write.run(tx);
        return true;
      });
    });
  }
}
