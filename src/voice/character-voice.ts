import { ReadableStream } from 'node:stream/web';
import { type VAD, VADEventType, initializeLogger, loggerOptions, voice } from '@livekit/agents';
import type { AudioFrame, Room } from '@livekit/rtc-node';
import type { SpeechClient, SynthesisOptions } from './speech.ts';
import { SpeechTTS } from './speech-plugins.ts';
import { SpokenTranscript } from './spoken-transcript.ts';

/**
 * A character's voice: a LiveKit Agents session that speaks the lines the room gives it (TTS),
 * and a VAD on each human's microphone that stops it when one talks over it. It never decides what to say
 * and never transcribes: the room's actor runs the character's turn (the one prompt builder and
 * capability executor of every surface), and one listening path per human transcribes
 * (HumanListener). A room, or memory for tests and tools, supplies the input and output.
 */

export interface CharacterVoiceOptions {
  speech: SpeechClient;
  /** Where it speaks: a LiveKit room (its agent participant's audio track), or any audio output (memory). */
  output: voice.AudioOutput | { room: Room };
  /** The character's voiceId and voiceDescription. */
  voice?: SynthesisOptions;
  /** Cuts the humans' audio into speech for interruptions; shared across voices (each human gets its own stream). */
  vad: VAD;
  /** Speech shorter than this does not cut the character off (a cough, a "mm"). */
  minInterruptionMs?: number;
}

/** A line once it has played. */
export interface SpokenLine {
  /** What the listeners heard: cut at the interruption when there was one. */
  text: string;
  interrupted: boolean;
}

export interface CharacterVoice {
  readonly session: voice.AgentSession;
  start(): Promise<void>;
  /** Speaks `text` as it arrives (a line still streaming from the model); resolves once it played or was cut off. */
  speak(text: AsyncIterable<string> | string): Promise<SpokenLine>;
  /** A human's microphone: their speech cuts the character off. Returns a function that stops listening. */
  hear(frames: AsyncIterable<AudioFrame>): () => void;
  close(): Promise<void>;
}

/**
 * agents-js logs through a process-wide logger (JSON on stdout) that must exist before any of its
 * objects, audio I/O included, is made. The first call sets the level; later calls do nothing.
 */
export function initAgentsLogger(level = 'warn'): void {
  if (!loggerOptions()) initializeLogger({ pretty: false, level });
}

export function createCharacterVoice(options: CharacterVoiceOptions): CharacterVoice {
  initAgentsLogger();
  const session = new voice.AgentSession({
    tts: new SpeechTTS({ client: options.speech, voice: options.voice }),
    // The session takes no turns of its own: with VAD turn detection it would end a human's
    // turn (and cut the character off) after every line it heard, including the line the
    // character is answering. Interruptions are watched here instead (hear()).
    turnHandling: { turnDetection: 'manual', preemptiveGeneration: { enabled: false } },
    userAwayTimeout: null,
  });
  let transcript: SpokenTranscript | null = null;
  const minSpeechMs = options.minInterruptionMs ?? 500;
  let current: voice.SpeechHandle | null = null;

  return {
    session,
    async start() {
      const agent = new voice.Agent({ instructions: '' });
      const { output } = options;
      if (output instanceof voice.AudioOutput) {
        transcript = new SpokenTranscript(output);
        session.output.audio = transcript.audio;
        session.output.transcription = transcript.text;
        await session.start({ agent });
        return;
      }
      // In a room, agents-js publishes the audio track. It takes no input: the humans' audio is
      // ours to read (hear()), their typed lines go to the room's director, not to this session,
      // and one player leaving must not close a character's voice.
      await session.start({ agent, room: output.room, inputOptions: { audioEnabled: false, textEnabled: false, closeOnDisconnect: false } });
      const roomAudio = session.output.audio;
      if (!roomAudio) throw new Error('the room gave the voice session no audio output');
      transcript = new SpokenTranscript(roomAudio);
      session.output.audio = transcript.audio;
      session.output.transcription = transcript.text;
    },
    async speak(text) {
      const pieces: string[] = [];
      const handle = session.say(typeof text === 'string' ? text : toStream(text, pieces));
      if (typeof text === 'string') pieces.push(text);
      current = handle;
      try {
        await handle.waitForPlayout();
      } finally {
        if (current === handle) current = null;
      }
      // An interrupted line is what SpokenTranscript mapped the played audio onto.
      return handle.interrupted ? { text: transcript?.lastHeard ?? '', interrupted: true } : { text: pieces.join('').trim(), interrupted: false };
    },
    hear(frames) {
      const abort = new AbortController();
      void watchSpeech(frames, options.vad, abort.signal, (speechMs) => {
        if (speechMs >= minSpeechMs && current && !current.interrupted && !current.done()) current.interrupt();
      });
      return () => abort.abort();
    },
    close: () => session.close(),
  };
}

/** Calls `onSpeech` with the length of the current speech (ms), for every VAD window while someone speaks. */
async function watchSpeech(frames: AsyncIterable<AudioFrame>, vad: VAD, signal: AbortSignal, onSpeech: (speechMs: number) => void): Promise<void> {
  const stream = vad.stream();
  signal.addEventListener('abort', () => stream.close(), { once: true });
  void (async () => {
    for await (const frame of frames) {
      if (signal.aborted) return;
      stream.pushFrame(frame);
    }
    if (!signal.aborted) stream.endInput();
  })().catch(() => {});
  try {
    for await (const event of stream) {
      if (event.type === VADEventType.INFERENCE_DONE && event.speaking) onSpeech(event.speechDuration);
    }
  } catch {
    // closed
  }
}

/** The line as agents-js takes it; `pieces` collects what went in. */
function toStream(text: AsyncIterable<string>, pieces: string[]): ReadableStream<string> {
  const iterator = text[Symbol.asyncIterator]();
  return new ReadableStream<string>({
    async pull(controller) {
      const next = await iterator.next();
      if (next.done) controller.close();
      else {
        pieces.push(next.value);
        controller.enqueue(next.value);
      }
    },
    async cancel() {
      await iterator.return?.();
    },
  });
}
