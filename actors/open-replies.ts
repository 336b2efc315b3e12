/** The part of an actor's event that tells where a reply starts and ends. */
export type StreamedEvent = { type: string; replyId?: string; done?: boolean };

export interface OpenRepliesDeps {
  /** Whether a process still answers (Colyseus' health check over Redis). */
  healthy(processId: string): Promise<boolean>;
  /** Tells a conversation's listeners that `replyId` ended because its process died. */
  end(conversationId: string, replyId: string): void;
  intervalMs: number;
}

/**
 * Replies streaming here from actors on other processes. A reply ends with its `done` chunk or
 * an `error`; if the process making it dies first, neither ever comes, so while any reply is
 * open its process is health-checked, and a dead one's replies are ended with an `error`.
 */
export class OpenReplies {
  readonly #deps: OpenRepliesDeps;
  readonly #open = new Map<string, { conversationId: string; processId: string }>();
  #timer: NodeJS.Timeout | null = null;
  #checking = false;

  constructor(deps: OpenRepliesDeps) {
    this.#deps = deps;
  }

  /** Every event received from another process, in order. */
  seen(conversationId: string, processId: string, event: StreamedEvent): void {
    if (event.type === 'chunk' && event.replyId) {
      if (event.done) this.#open.delete(event.replyId);
      else if (!this.#open.has(event.replyId)) this.#open.set(event.replyId, { conversationId, processId });
    } else if (event.type === 'error' && event.replyId) {
      this.#open.delete(event.replyId);
    }
    this.#schedule();
  }

  #schedule(): void {
    if (this.#open.size > 0 && !this.#timer) {
      this.#timer = setInterval(() => void this.#check(), this.#deps.intervalMs);
      this.#timer.unref();
    } else if (this.#open.size === 0 && this.#timer) {
      clearInterval(this.#timer);
      this.#timer = null;
    }
  }

  async #check(): Promise<void> {
    if (this.#checking) return;
    this.#checking = true;
    try {
      const processes = new Set([...this.#open.values()].map((reply) => reply.processId));
      for (const processId of processes) {
        if (await this.#deps.healthy(processId).catch(() => true)) continue;
        for (const [replyId, reply] of this.#open) {
          if (reply.processId !== processId) continue;
          this.#open.delete(replyId);
          this.#deps.end(reply.conversationId, replyId);
        }
      }
    } finally {
      this.#checking = false;
      this.#schedule();
    }
  }
}
