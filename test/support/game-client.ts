import { Callbacks, Client, type Room } from '@colyseus/sdk';

/** The conversation state as a game client decodes it (by reflection, as a game would). */
export interface GameState {
  conversationId: string;
  characterId: string;
  messages: { id: string; role: string; content: string; createdAt: string }[];
  speaking: boolean;
  partialReply: string;
  lastCapability?: { characterId: string; name: string; params: string; callId: string };
}

export interface GameEvent {
  type: string;
  [key: string]: unknown;
}

/**
 * A game client on the real Colyseus SDK, joined to a conversation's room, with its room
 * messages queued so tests can wait for the next one of a type, and waits on state changes.
 */
export class GameClient {
  readonly room: Room<unknown, GameState>;
  readonly #events: GameEvent[] = [];
  readonly #waiters: { type: string | null; resolve: (event: GameEvent) => void }[] = [];
  readonly #stateWaiters: { test: (state: GameState) => boolean; resolve: () => void }[] = [];

  private constructor(room: Room<unknown, GameState>) {
    this.room = room;
    room.onMessage('*', (type, payload) => {
      const event = { ...(payload as Record<string, unknown>), type: String(type) };
      const i = this.#waiters.findIndex((w) => w.type === null || w.type === event.type);
      if (i === -1) this.#events.push(event);
      else this.#waiters.splice(i, 1)[0]?.resolve(event);
    });
    room.onStateChange(() => this.#checkState());
  }

  /** Joins a conversation's room, or a voice room's (`room_…`), by id. */
  static async join(baseUrl: string, key: string, id: string): Promise<GameClient> {
    const client = new Client(baseUrl);
    client.auth.token = key;
    const room = await client.joinById<GameState>(id);
    const game = new GameClient(room);
    // The first full state follows the join; a game would wait for it too.
    const field = id.startsWith('room_') ? 'roomId' : 'conversationId';
    await game.until((state) => typeof (state as unknown as Record<string, unknown> | undefined)?.[field] === 'string');
    return game;
  }

  get state(): GameState {
    return this.room.state;
  }

  /** The next room message (of `type`, skipping none of the others: they stay queued). */
  next(type: string | null = null): Promise<GameEvent> {
    const i = this.#events.findIndex((e) => type === null || e.type === type);
    if (i !== -1) return Promise.resolve(this.#events.splice(i, 1)[0] as GameEvent);
    return new Promise((resolve) => this.#waiters.push({ type, resolve }));
  }

  /** The text of the next complete reply, from its `chunk` messages. */
  async reply(): Promise<string> {
    let text = '';
    for (;;) {
      const chunk = await this.next('chunk');
      if (chunk.done) return text;
      text += String(chunk.content);
    }
  }

  /** Resolves once the synchronised state satisfies `test`. */
  until(test: (state: GameState) => boolean): Promise<void> {
    if (this.state && test(this.state)) return Promise.resolve();
    return new Promise((resolve) => this.#stateWaiters.push({ test, resolve }));
  }

  /** Every value `speaking` takes, from now on. */
  recordSpeaking(): boolean[] {
    const seen: boolean[] = [];
    // Typed for schema classes; this client decodes by reflection, so the fields are untyped.
    const callbacks = Callbacks.get(this.room as never) as unknown as { listen(field: string, cb: (value: unknown) => void): void };
    callbacks.listen('speaking', (value) => seen.push(value as boolean));
    return seen;
  }

  send(type: string, payload: unknown): void {
    this.room.send(type, payload);
  }

  async leave(): Promise<void> {
    await this.room.leave();
  }

  #checkState(): void {
    for (let i = this.#stateWaiters.length - 1; i >= 0; i--) {
      const waiter = this.#stateWaiters[i];
      if (waiter && this.state && waiter.test(this.state)) {
        this.#stateWaiters.splice(i, 1);
        waiter.resolve();
      }
    }
  }
}
