// The pool that parses untrusted uploads off the main thread. Each worker thread has a V8 heap
// cap, and each task a deadline: a task over either ends the worker (Piscina replaces it) and
// resolves as {ok:false} with a reason, so a hostile file costs one worker, never the process.
import { Piscina } from 'piscina';
import type { DocumentMimeType, ParseLimits, ParseResult } from '../src/documents/types.ts';
import type { ChunkOptions } from '../src/documents/chunker.ts';
import { PackedChunks } from '../src/documents/packed-chunks.ts';
import type { ExtractResult, ExtractTask, ParseTask } from './parse-document.ts';

export type Extracted = { ok: true; chunks: PackedChunks; pages: number | null } | { ok: false; error: string };

export interface ParserPoolOptions {
  maxThreads: number;
  /** Heap cap per worker thread (V8 old generation), in MB. */
  maxMemoryMb: number;
  /** Deadline per task, in ms; the worker running it is terminated when it passes. */
  timeoutMs: number;
  limits: ParseLimits;
}

const TOO_SLOW = 'Reading the file took too long, so it was stopped. Split it into smaller files or simplify it, then upload again.';
const TOO_BIG = 'Reading the file needed more memory than allowed, so it was stopped. Split it into smaller files or reduce its images, then upload again.';
const CANCELLED = 'Reading the file was cancelled.';
const CRASHED = 'The file could not be read: the parser stopped unexpectedly. Export the file again and upload it.';

function isOutOfMemory(error: unknown): boolean {
  const e = error as { code?: string; message?: string } | null;
  return e?.code === 'ERR_WORKER_OUT_OF_MEMORY' || /out of memory/i.test(e?.message ?? '');
}

/** Transfers the bytes when they are the whole of their buffer, else copies (a Buffer slice shares its pool). */
function transferable(bytes: Uint8Array): { bytes: Uint8Array; transfer: ArrayBuffer[] } {
  const buffer = bytes.buffer;
  if (buffer instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === buffer.byteLength) {
    return { bytes, transfer: [buffer] };
  }
  const copy = new Uint8Array(bytes); // not bytes.slice(): on a Buffer that is a view of the same memory
  return { bytes: copy, transfer: [copy.buffer] };
}

export class ParserPool {
  private readonly pool: Piscina<ParseTask | ExtractTask, ParseResult | ExtractResult>;
  private readonly timeoutMs: number;
  private readonly limits: ParseLimits;

  constructor(opts: ParserPoolOptions) {
    this.timeoutMs = opts.timeoutMs;
    this.limits = opts.limits;
    this.pool = new Piscina({
      // Node 24 strips the types of a .ts worker itself, as it does for the main thread.
      filename: new URL('./parse-document.ts', import.meta.url).href,
      minThreads: 0,
      maxThreads: opts.maxThreads,
      idleTimeout: 30_000,
      resourceLimits: {
        maxOldGenerationSizeMb: opts.maxMemoryMb,
        maxYoungGenerationSizeMb: Math.max(8, Math.floor(opts.maxMemoryMb / 16)),
        stackSizeMb: 4,
      },
    });
  }

  /**
   * Parses in a worker; never throws. Takes ownership of `bytes`: when they fill their whole
   * ArrayBuffer it is transferred to the worker and is detached (empty) here afterwards.
   */
  async parse(bytes: Uint8Array, mimeType: DocumentMimeType, signal?: AbortSignal): Promise<ParseResult> {
    return (await this.#run({ bytes, mimeType, limits: this.limits }, 'default', signal)) as ParseResult;
  }

  /**
   * Parses and chunks in the worker: only the chunks come back, packed (their texts are decoded
   * when read). Same ownership rule as parse().
   */
  async extract(bytes: Uint8Array, mimeType: DocumentMimeType, chunking: ChunkOptions, signal?: AbortSignal): Promise<Extracted> {
    const result = (await this.#run({ bytes, mimeType, limits: this.limits, chunking }, 'extractChunks', signal)) as ExtractResult;
    return result.ok ? { ok: true, chunks: new PackedChunks(result.packed), pages: result.pages } : result;
  }

  async #run(task: ParseTask | ExtractTask, name: string, signal: AbortSignal | undefined): Promise<ParseResult | ExtractResult> {
    const deadline = AbortSignal.timeout(this.timeoutMs);
    const moved = transferable(task.bytes);
    try {
      return await this.pool.run(
        { ...task, bytes: moved.bytes },
        { name, signal: signal ? AbortSignal.any([signal, deadline]) : deadline, transferList: moved.transfer },
      );
    } catch (error) {
      if (deadline.aborted) return { ok: false, error: TOO_SLOW };
      if (signal?.aborted) return { ok: false, error: CANCELLED };
      if (isOutOfMemory(error)) return { ok: false, error: TOO_BIG };
      return { ok: false, error: CRASHED };
    }
  }

  /** Ends every worker; tasks still running resolve as failures. */
  async close(): Promise<void> {
    await this.pool.destroy();
  }
}
