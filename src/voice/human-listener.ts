import { type VAD, VADEventType, mergeFrames } from '@livekit/agents';
import type { AudioFrame } from '@livekit/rtc-node';
import type { SpeechClient } from './speech.ts';

export interface HumanListenerOptions {
  speech: SpeechClient;
  vad: VAD;
  /** A finished utterance, transcribed (never empty). */
  onLine(text: string): void;
  /** An utterance that could not be transcribed; listening goes on. */
  onFailure(err: Error): void;
}

/**
 * One human's listening path in a voice room: the VAD cuts their audio into utterances and each
 * is transcribed once (one transcription per utterance, whatever the number of characters), in
 * the order spoken. The room's director decides who answers.
 */
export class HumanListener {
  readonly #abort = new AbortController();
  readonly #done: Promise<void>;

  constructor(frames: AsyncIterable<AudioFrame>, options: HumanListenerOptions) {
    this.#done = this.#run(frames, options);
  }

  async #run(frames: AsyncIterable<AudioFrame>, options: HumanListenerOptions): Promise<void> {
    const stream = options.vad.stream();
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      stream.close();
    };
    const feed = (async () => {
      for await (const frame of frames) {
        if (this.#abort.signal.aborted) break;
        stream.pushFrame(frame);
      }
      if (!closed) stream.endInput();
    })().catch((err: unknown) => {
      if (!this.#abort.signal.aborted) options.onFailure(err as Error);
      close();
    });
    const onAbort = close;
    this.#abort.signal.addEventListener('abort', onAbort, { once: true });
    try {
      for await (const event of stream) {
        if (event.type !== VADEventType.END_OF_SPEECH || event.frames.length === 0) continue;
        const utterance = mergeFrames(event.frames);
        try {
          const text = (await options.speech.transcribe(utterance.data, utterance.sampleRate, this.#abort.signal)).trim();
          if (text) options.onLine(text);
        } catch (err) {
          if (this.#abort.signal.aborted) return;
          options.onFailure(err as Error);
        }
      }
    } finally {
      this.#abort.signal.removeEventListener('abort', onAbort);
      // The feed ends with the audio (a participant leaving), not with us: it is not waited for.
      void feed;
    }
  }

  /** Stops listening; an utterance being transcribed is dropped. */
  async close(): Promise<void> {
    this.#abort.abort();
    await this.#done.catch(() => {});
  }
}
