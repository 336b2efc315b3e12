import type { VAD } from '@livekit/agents';
import type { AudioFrame } from '@livekit/rtc-node';
import type { Logger } from 'pino';
import type { RoomEvent } from '../rooms/events.ts';
import type { CharacterVoice } from './character-voice.ts';
import { HumanListener } from './human-listener.ts';
import type { SpeechClient } from './speech.ts';
import { TextQueue } from './text-queue.ts';

/** What a voice agent sends its room: a human's transcribed line, or a report on a line it played. */
export type RoomAgentMessage =
  | { content: string; speakerName: string | null }
  | { type: 'spoken'; replyId: string; text: string; interrupted: boolean };

/** The agent's connection to its room (the room WebSocket: src/voice/room-socket-link.ts). */
export interface RoomLink {
  send(message: RoomAgentMessage): void;
}

export type CapabilityEvent = Extract<RoomEvent, { type: 'capability' }>;

export interface RoomVoiceAgentOptions {
  characterId: string;
  voice: CharacterVoice;
  link: RoomLink;
  speech: SpeechClient;
  vad: VAD;
  /** The character's capability calls, for the humans' devices (LiveKit data messages). */
  onCapability?: (event: CapabilityEvent) => void;
  logger: Logger;
}

interface Human {
  name: string | null;
  frames: () => AsyncIterable<AudioFrame>;
  listener: HumanListener | null;
  /** Stops the character's voice hearing them (for interruptions). */
  unhear: () => void;
}

/**
 * One character's voice in a room, driven by the room's actor like every other client of the
 * room: it speaks the lines the room streams for its character (and tells the room what was
 * heard of each), relays its capability calls, and, when it holds the room's listening path,
 * transcribes each human (one HumanListener per human) and says their lines to the room. Who
 * answers is the room's director's call, never the agent's.
 */
export class RoomVoiceAgent {
  readonly #options: RoomVoiceAgentOptions;
  readonly #lines = new Map<string, TextQueue>();
  readonly #humans = new Map<string, Human>();
  #listening = false;
  #closed = false;

  constructor(options: RoomVoiceAgentOptions) {
    this.#options = options;
  }

  /** Every room event, in order (the link's listener). */
  handle(event: RoomEvent): void {
    if (this.#closed) return;
    if (event.type === 'ready') {
      // (Re)connected: a line cut off by the lost connection will get no more text.
      for (const line of this.#lines.values()) line.end();
    } else if (event.type === 'chunk' && event.characterId === this.#options.characterId) {
      let line = this.#lines.get(event.replyId);
      if (!line) {
        line = new TextQueue();
        this.#lines.set(event.replyId, line);
        void this.#play(event.replyId, line);
      }
      line.push(event.content);
      if (event.done) line.end();
    } else if (event.type === 'error' && event.replyId !== undefined) {
      // The line failed mid-way: what arrived is said, nothing more will come.
      this.#lines.get(event.replyId)?.end();
    } else if (event.type === 'capability' && event.characterId === this.#options.characterId) {
      this.#options.onCapability?.(event);
    }
  }

  /** A human joined the voice session; `frames` opens a new stream of their microphone. */
  addHuman(identity: string, name: string | null, frames: () => AsyncIterable<AudioFrame>): void {
    if (this.#humans.has(identity)) return;
    const human: Human = { name, frames, listener: null, unhear: this.#options.voice.hear(frames()) };
    this.#humans.set(identity, human);
    if (this.#listening) this.#listen(identity, human);
  }

  removeHuman(identity: string): void {
    const human = this.#humans.get(identity);
    this.#humans.delete(identity);
    human?.unhear();
    void human?.listener?.close();
  }

  /** Whether this agent holds the room's listening path (one per room: see the worker). */
  setListening(on: boolean): void {
    if (on === this.#listening) return;
    this.#listening = on;
    for (const [identity, human] of this.#humans) {
      if (on) this.#listen(identity, human);
      else {
        void human.listener?.close();
        human.listener = null;
      }
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const line of this.#lines.values()) line.end();
    for (const human of this.#humans.values()) human.unhear();
    await Promise.all([...this.#humans.values()].map((human) => human.listener?.close()));
    this.#humans.clear();
  }

  #listen(identity: string, human: Human): void {
    const { logger, link, speech, vad } = this.#options;
    human.listener = new HumanListener(human.frames(), {
      speech,
      vad,
      onLine: (text) => link.send({ content: text, speakerName: human.name }),
      onFailure: (err) => logger.warn({ err, identity }, 'a human utterance could not be transcribed'),
    });
  }

  async #play(replyId: string, line: TextQueue): Promise<void> {
    const { link, voice, logger } = this.#options;
    try {
      const spoken = await voice.speak(line);
      link.send({ type: 'spoken', replyId, text: spoken.text, interrupted: spoken.interrupted });
    } catch (err) {
      // Nothing reliable was heard: the room stores nothing for the line and the humans have the floor.
      logger.error({ err, replyId, characterId: this.#options.characterId }, 'a line could not be spoken');
      link.send({ type: 'spoken', replyId, text: '', interrupted: true });
    } finally {
      this.#lines.delete(replyId);
    }
  }
}
