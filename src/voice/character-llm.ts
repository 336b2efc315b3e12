import { randomUUID } from 'node:crypto';
import { type APIConnectOptions, DEFAULT_API_CONNECT_OPTIONS, llm } from '@livekit/agents';

/**
 * The character's side of a voice turn: given the session's history (the user's committed line
 * last), the text the character says, as it is produced. Troupe's own turn loop plugs in here,
 * so a spoken turn goes through the same prompt, memory and transcript as a typed one.
 */
export type CharacterResponder = (chatContext: llm.ChatContext, signal: AbortSignal) => AsyncIterable<string>;

/**
 * agents-js's LLM seat filled by a CharacterResponder. No tools, no retries: agents-js retries
 * only its own APIError, and a character turn has side effects (transcript writes) that a retry
 * would repeat, so a failure surfaces as the session's `error` event instead.
 */
export class CharacterLLM extends llm.LLM {
  readonly #respond: CharacterResponder;

  constructor(respond: CharacterResponder) {
    super();
    this.#respond = respond;
  }

  label(): string {
    return 'troupe.CharacterLLM';
  }

  chat({ chatCtx, connOptions = DEFAULT_API_CONNECT_OPTIONS }: { chatCtx: llm.ChatContext; connOptions?: APIConnectOptions }): llm.LLMStream {
    return new CharacterLLMStream(this, chatCtx, connOptions, this.#respond);
  }
}

class CharacterLLMStream extends llm.LLMStream {
  readonly #respond: CharacterResponder;

  constructor(owner: CharacterLLM, chatCtx: llm.ChatContext, connOptions: APIConnectOptions, respond: CharacterResponder) {
    super(owner, { chatCtx, connOptions });
    this.#respond = respond;
  }

  protected async run(): Promise<void> {
    const id = randomUUID();
    const signal = this.abortController.signal;
    for await (const content of this.#respond(this.chatCtx, signal)) {
      // An interrupted reply is closed by the session; the responder sees the same signal.
      if (signal.aborted) return;
      if (content !== '') this.queue.put({ id, delta: { role: 'assistant', content } });
    }
  }
}
