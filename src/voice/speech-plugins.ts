import { randomUUID } from 'node:crypto';
import {
  type APIConnectOptions,
  type AudioBuffer,
  DEFAULT_API_CONNECT_OPTIONS,
  asLanguageCode,
  mergeFrames,
  stt,
  tts,
} from '@livekit/agents';
import { AudioFrame } from '@livekit/rtc-node';
import { type SpeechClient, type SynthesisOptions, TTS_SAMPLE_RATE } from './speech.ts';

/**
 * SpeechClient as agents-js STT and TTS plugins, so a character's voice session hears and speaks
 * through the same OpenAI-compatible endpoints (and the same errors) as the rest of Troupe.
 */

/** 20 ms: fine enough that an interrupted line stops within a frame of the cut. */
const TTS_FRAME_SAMPLES = TTS_SAMPLE_RATE / 50;

export interface SpeechSTTOptions {
  client: SpeechClient;
  /** BCP-47 code reported with transcripts; the speech server is not told (it detects). */
  language?: string;
}

/**
 * Non-streaming STT: agents-js wraps it in its StreamAdapter, which cuts the input at the VAD's
 * end of speech and hands each utterance here, so one HTTP transcription runs per utterance.
 */
export class SpeechSTT extends stt.STT {
  label = 'troupe.SpeechSTT';
  readonly #client: SpeechClient;
  readonly #language: string;

  constructor({ client, language = 'en' }: SpeechSTTOptions) {
    super({ streaming: false, interimResults: false });
    this.#client = client;
    this.#language = language;
  }

  override get provider(): string {
    return 'troupe-speech';
  }

  protected async _recognize(buffer: AudioBuffer, abortSignal?: AbortSignal): Promise<stt.SpeechEvent> {
    const frame = mergeFrames(buffer);
    if (frame.channels !== 1) throw new Error(`SpeechSTT takes mono audio, got ${frame.channels} channels`);
    let text: string;
    try {
      text = await this.#client.transcribe(frame.data, frame.sampleRate, abortSignal ?? new AbortController().signal);
    } catch (err) {
      // The StreamAdapter only logs a failed utterance; this makes it a session `error` event.
      // Recoverable: the next utterance may well be heard, so the session stays up.
      if (!abortSignal?.aborted) {
        this.emit('error', { type: 'stt_error', timestamp: Date.now(), label: this.label, error: err as Error, recoverable: true });
      }
      throw err;
    }
    const seconds = frame.samplesPerChannel / frame.sampleRate;
    return {
      type: stt.SpeechEventType.FINAL_TRANSCRIPT,
      alternatives: [{ text, language: asLanguageCode(this.#language), startTime: 0, endTime: seconds, confidence: 1 }],
    };
  }

  stream(): stt.SpeechStream {
    throw new Error('SpeechSTT does not stream: the voice session wraps it with a VAD (stt.StreamAdapter)');
  }
}

export interface SpeechTTSOptions {
  client: SpeechClient;
  /** The character's voiceId and voiceDescription. */
  voice?: SynthesisOptions;
}

/**
 * Non-streaming TTS: agents-js splits the reply into sentences and synthesizes each here, so the
 * first sentence plays while the next is being made.
 */
export class SpeechTTS extends tts.TTS {
  label = 'troupe.SpeechTTS';
  readonly #client: SpeechClient;
  readonly #voice: SynthesisOptions;

  constructor({ client, voice = {} }: SpeechTTSOptions) {
    super(TTS_SAMPLE_RATE, 1, { streaming: false });
    this.#client = client;
    this.#voice = voice;
  }

  override get provider(): string {
    return 'troupe-speech';
  }

  synthesize(text: string, connOptions: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS, abortSignal?: AbortSignal): SpeechChunkedStream {
    return new SpeechChunkedStream(this, text, this.#client, this.#voice, connOptions, abortSignal);
  }

  stream(): tts.SynthesizeStream {
    throw new Error('SpeechTTS does not stream: the voice session wraps it with a sentence tokenizer (tts.StreamAdapter)');
  }
}

class SpeechChunkedStream extends tts.ChunkedStream {
  label = 'troupe.SpeechChunkedStream';
  readonly #client: SpeechClient;
  readonly #voice: SynthesisOptions;

  constructor(owner: SpeechTTS, text: string, client: SpeechClient, voice: SynthesisOptions, connOptions: APIConnectOptions, abortSignal?: AbortSignal) {
    super(text, owner, connOptions, abortSignal);
    this.#client = client;
    this.#voice = voice;
  }

  protected async run(): Promise<void> {
    const requestId = randomUUID();
    const framer = new Pcm16Framer(TTS_FRAME_SAMPLES);
    // Held back one frame so the last one can be marked final.
    let pending: AudioFrame | null = null;
    const put = (frame: AudioFrame, final: boolean) => this.queue.put({ requestId, segmentId: requestId, frame, final });
    try {
      for await (const chunk of this.#client.synthesize(this.inputText, this.#voice, this.abortSignal)) {
        for (const frame of framer.push(chunk)) {
          if (pending) put(pending, false);
          pending = frame;
        }
      }
    } catch (err) {
      // An interrupted line is closed by the session: not a failure.
      if (this.abortSignal.aborted) return;
      throw err;
    }
    const rest = framer.end();
    if (rest) {
      if (pending) put(pending, false);
      pending = rest;
    }
    if (pending) put(pending, true);
  }
}

/** Cuts a PCM16 byte stream into mono frames of `samples` samples; the tail comes out at the end. */
class Pcm16Framer {
  readonly #frameBytes: number;
  #buffered: Buffer[] = [];
  #bufferedBytes = 0;

  constructor(samples: number) {
    this.#frameBytes = samples * 2;
  }

  push(chunk: Buffer): AudioFrame[] {
    this.#buffered.push(chunk);
    this.#bufferedBytes += chunk.length;
    if (this.#bufferedBytes < this.#frameBytes) return [];
    const all = Buffer.concat(this.#buffered);
    const whole = all.length - (all.length % this.#frameBytes);
    const frames: AudioFrame[] = [];
    for (let at = 0; at < whole; at += this.#frameBytes) frames.push(toFrame(all.subarray(at, at + this.#frameBytes)));
    const rest = all.subarray(whole);
    this.#buffered = rest.length > 0 ? [rest] : [];
    this.#bufferedBytes = rest.length;
    return frames;
  }

  end(): AudioFrame | null {
    const all = Buffer.concat(this.#buffered);
    this.#buffered = [];
    this.#bufferedBytes = 0;
    return all.length >= 2 ? toFrame(all.subarray(0, all.length - (all.length % 2))) : null;
  }
}

/** Copies: the bytes may sit at an odd offset of a pooled buffer, and Int16Array needs alignment. */
function toFrame(bytes: Buffer): AudioFrame {
  const samples = new Int16Array(bytes.length / 2);
  for (let i = 0; i < samples.length; i++) samples[i] = bytes.readInt16LE(i * 2);
  return new AudioFrame(samples, TTS_SAMPLE_RATE, 1, samples.length);
}
