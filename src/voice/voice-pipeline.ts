import { EventEmitter } from 'node:events';
import { type VAD, inference, initializeLogger, llm, loggerOptions, voice } from '@livekit/agents';
import { type CharacterResponder, CharacterLLM } from './character-llm.ts';
import type { SpeechClient, SynthesisOptions } from './speech.ts';
import { SpeechSTT, SpeechTTS } from './speech-plugins.ts';
import { SpokenTranscript } from './spoken-transcript.ts';

/**
 * One character's voice: a LiveKit Agents session (VAD -> STT -> the character's turn -> TTS)
 * between an audio input and an audio output. The session never sees a room here: a room, or
 * memory for tests and tools, supplies the input and output.
 */

export interface VoicePipelineOptions {
  speech: SpeechClient;
  /** The character's turn: Troupe's turn loop, not a second prompt path. */
  respond: CharacterResponder;
  input: voice.AudioInput;
  output: voice.AudioOutput;
  /** The character's voiceId and voiceDescription. */
  voice?: SynthesisOptions;
  /** Reported with transcripts. */
  language?: string;
  /** Shared across sessions to share its options; each session still gets its own stream. Default: the offline inference.VAD. */
  vad?: VAD;
  /** Silence after the user's speech before their turn is taken as over. */
  endpointingDelayMs?: number;
  /** Speech shorter than this does not cut the character off (a cough, a "mm"). */
  minInterruptionMs?: number;
  /**
   * How long the character cannot be interrupted at its first reply, while a room's echo
   * cancellation settles; null for outputs without echo (memory). Default: agents-js's 3000.
   */
  aecWarmupMs?: number | null;
}

export interface UserLine {
  text: string;
}

export interface AgentLine {
  /** What the listener heard: cut at the interruption when there was one. */
  text: string;
  interrupted: boolean;
}

export interface VoicePipelineEvents {
  /** The user's turn, as committed to the character. */
  'user-line': [UserLine];
  /** A line of the character's, once it has played (or been cut off). */
  'agent-line': [AgentLine];
  /**
   * A failed transcription, synthesis or character turn; the session may go on. Not `error`:
   * an EventEmitter throws an `error` nobody listens to, which would end the process.
   */
  failure: [Error];
  /** The session ended: closed by us, or by agents-js after errors it cannot recover from. */
  closed: [{ reason: string; error: Error | null }];
}

export interface VoicePipeline {
  readonly session: voice.AgentSession;
  readonly events: EventEmitter<VoicePipelineEvents>;
  start(): Promise<void>;
  close(): Promise<void>;
}

/**
 * agents-js logs through a process-wide logger (JSON on stdout) that must exist before any of its
 * objects, audio I/O included, is made. The first call sets the level; later calls do nothing.
 */
export function initAgentsLogger(level = 'warn'): void {
  if (!loggerOptions()) initializeLogger({ pretty: false, level });
}

export function createVoicePipeline(options: VoicePipelineOptions): VoicePipeline {
  initAgentsLogger();

  const session = new voice.AgentSession({
    stt: new SpeechSTT({ client: options.speech, language: options.language }),
    tts: new SpeechTTS({ client: options.speech, voice: options.voice }),
    llm: new CharacterLLM(options.respond),
    vad: options.vad ?? new inference.VAD(),
    turnHandling: {
      // 'vad' ends the turn on the VAD's end of speech. Left unset, agents-js builds a turn
      // detector that picks LiveKit's cloud model in dev mode (and fails offline).
      turnDetection: 'vad',
      endpointing: { minDelay: options.endpointingDelayMs ?? 500 },
      // 'adaptive' would call LiveKit's cloud interruption model. Resuming after a false
      // interruption needs an output that can pause (memory cannot; a room can).
      interruption: { mode: 'vad', minDuration: options.minInterruptionMs ?? 500, resumeFalseInterruption: options.output.canPause },
      // A preemptive reply would run the character's turn (and its transcript writes) on a
      // transcript the user may still change.
      preemptiveGeneration: { enabled: false },
    },
    ...(options.aecWarmupMs !== undefined ? { aecWarmupDuration: options.aecWarmupMs } : {}),
    userAwayTimeout: null,
  });

  const events = new EventEmitter<VoicePipelineEvents>();
  const transcript = new SpokenTranscript(options.output);

  session.on(voice.AgentSessionEventTypes.ConversationItemAdded, ({ item }) => {
    if (!(item instanceof llm.ChatMessage)) return;
    const text = item.textContent ?? '';
    if (item.role === 'user') events.emit('user-line', { text });
    else if (item.role === 'assistant') events.emit('agent-line', { text, interrupted: item.interrupted });
  });
  session.on(voice.AgentSessionEventTypes.Error, ({ error }) => events.emit('failure', causeOf(error)));
  session.on(voice.AgentSessionEventTypes.Close, ({ reason, error }) => {
    events.emit('closed', { reason: String(reason), error: error ? causeOf(error) : null });
  });

  return {
    session,
    events,
    async start() {
      session.input.audio = options.input;
      session.output.audio = transcript.audio;
      session.output.transcription = transcript.text;
      // The character's instructions live in Troupe's turn loop, not in agents-js's chat context.
      await session.start({ agent: new voice.Agent({ instructions: '' }) });
    },
    close: () => session.close(),
  };
}

/** agents-js wraps model errors as `{type: 'stt_error', error, ...}`; interruption errors are bare. */
function causeOf(error: voice.ErrorEvent['error']): Error {
  return error instanceof Error ? error : error.error;
}
