import { randomUUID } from 'node:crypto';
import { type APIConnectOptions, DEFAULT_API_CONNECT_OPTIONS, llm } from '@livekit/agents';
import { openSocket } from './ws-client.ts';

export interface RoomLLMOptions {
  /** Troupe's base URL and a project key. */
  baseUrl: string;
  key: string;
  roomId: string;
  /** The player's name on their lines. */
  speakerName: string;
  /** Character ids to names, for the `Name: line` the room's answer is written as. */
  names: Record<string, string>;
}

/**
 * A Troupe room in agents-js's LLM seat, so agents-js's test helpers
 * (`session.run({userInput}).wait()`, `result.expect`) drive the room's director as text turns:
 * the user's input is said in the room, and the run's answer is the line of the character the
 * director gave the floor to, as `Name: line` (empty when it gave the floor back to the players).
 * Use it with ROOM_MAX_AGENT_TURNS=0: characters answering each other would speak after the run.
 */
export class RoomLLM extends llm.LLM {
  readonly #options: RoomLLMOptions;

  constructor(options: RoomLLMOptions) {
    super();
    this.#options = options;
  }

  label(): string {
    return 'test.RoomLLM';
  }

  chat({ chatCtx, connOptions = DEFAULT_API_CONNECT_OPTIONS }: { chatCtx: llm.ChatContext; connOptions?: APIConnectOptions }): llm.LLMStream {
    return new RoomLLMStream(this, chatCtx, connOptions, this.#options);
  }
}

class RoomLLMStream extends llm.LLMStream {
  readonly #options: RoomLLMOptions;

  constructor(owner: RoomLLM, chatCtx: llm.ChatContext, connOptions: APIConnectOptions, options: RoomLLMOptions) {
    super(owner, { chatCtx, connOptions });
    this.#options = options;
  }

  protected async run(): Promise<void> {
    const { baseUrl, key, roomId, speakerName, names } = this.#options;
    const last = this.chatCtx.items.at(-1);
    const content = last instanceof llm.ChatMessage && last.role === 'user' ? (last.textContent ?? '') : '';
    const socket = await openSocket(`${baseUrl.replace('http', 'ws')}/v1/rooms/${roomId}/ws?token=${key}`);
    try {
      await socket.next('ready');
      const said = await fetch(`${baseUrl}/v1/rooms/${roomId}/messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ content, speakerName }),
      });
      if (said.status !== 202) throw new Error(`the room refused the line: HTTP ${said.status} ${await said.text()}`);
      const id = randomUUID();
      for (;;) {
        const event = await socket.next();
        if (event.type === 'error') throw new Error(`room error: ${JSON.stringify(event)}`);
        if (event.type === 'speaker' && event.characterId === null) break;
        if (event.type === 'speaker') {
          const name = names[String(event.characterId)] ?? String(event.characterId);
          this.queue.put({ id, delta: { role: 'assistant', content: `${name}: ` } });
        } else if (event.type === 'chunk' && event.content !== '') {
          this.queue.put({ id, delta: { role: 'assistant', content: String(event.content) } });
        }
      }
    } finally {
      await socket.close();
    }
  }
}
