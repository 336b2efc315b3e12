import { setTimeout as sleep } from 'node:timers/promises';
import { ReadableStream, type ReadableStreamDefaultController } from 'node:stream/web';
import { voice } from '@livekit/agents';
import { AudioFrame } from '@livekit/rtc-node';

/**
 * Audio that lives in memory instead of a LiveKit room: a voice session's ears fed from PCM
 * (a WAV file, synthesized speech) and its mouth recorded with a simulated speaker, so a whole
 * spoken turn, interruptions included, runs in a test or a tool without a server.
 */

export interface PushOptions {
  /** Frame length: 10-20 ms is what a room delivers. */
  frameMs?: number;
  /** Pace frames at wall-clock speed, as a microphone would (false: as fast as the session takes them). */
  realtime?: boolean;
  signal?: AbortSignal;
}

/** Microphone side: PCM pushed here reaches the session's VAD and STT. */
export class MemoryAudioInput extends voice.AudioInput {
  #controller!: ReadableStreamDefaultController<AudioFrame>;
  #closed = false;

  constructor() {
    super();
    this.multiStream.addInputStream(
      new ReadableStream<AudioFrame>({
        start: (controller) => {
          this.#controller = controller;
        },
      }),
    );
  }

  pushFrame(frame: AudioFrame): void {
    if (!this.#closed) this.#controller.enqueue(frame);
  }

  /** Mono PCM16 at `sampleRate`, cut into frames; resolves once the last frame was pushed. */
  async pushPcm(samples: Int16Array, sampleRate: number, { frameMs = 20, realtime = true, signal }: PushOptions = {}): Promise<void> {
    const size = Math.max(1, Math.round((sampleRate * frameMs) / 1000));
    const startedAt = performance.now();
    for (let at = 0, index = 0; at < samples.length; at += size, index++) {
      signal?.throwIfAborted();
      // Paced against the start, not frame to frame, so timer lateness does not add up.
      if (realtime) {
        const due = startedAt + index * frameMs - performance.now();
        if (due > 0) await sleep(due, undefined, { signal });
      }
      const data = samples.slice(at, at + size);
      this.pushFrame(new AudioFrame(data, sampleRate, 1, data.length));
    }
  }

  /** `ms` of digital silence. */
  pushSilence(ms: number, sampleRate: number, options?: PushOptions): Promise<void> {
    return this.pushPcm(new Int16Array(Math.round((sampleRate * ms) / 1000)), sampleRate, options);
  }

  override async close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      this.#controller.close();
    }
    await super.close();
  }
}

/** One reply segment as the speaker played it. */
export interface PlayedSegment {
  sampleRate: number;
  /** Everything the session sent for this segment. */
  captured: Int16Array;
  /** What played before the end or an interruption (a prefix of `captured`). */
  played: Int16Array;
  interrupted: boolean;
  /** Date.now() when it started to play and when it stopped (two voices must not overlap). */
  startedAt: number;
  endedAt: number;
}

export interface MemoryAudioOutputOptions {
  /** Frames at another rate are resampled to this by the session; unset keeps the TTS rate. */
  sampleRate?: number;
  /** Play at wall-clock speed so a reply takes as long as it sounds and can be interrupted (false: done at once). */
  realtime?: boolean;
}

interface Playing {
  frames: AudioFrame[];
  capturedMs: number;
  /** Date.now() when it starts (or started) to play: after the segment ahead of it. */
  startsAt: number;
  flushed: boolean;
  timer: NodeJS.Timeout | null;
}

/**
 * Speaker side: records what the session says and reports playback as agents-js expects: one
 * playbackStarted per segment (stamped with when it starts to play, after any segment ahead of
 * it), one playbackFinished per segment when it has played out after its flush or, at
 * clearBuffer, interrupted at the position reached.
 */
export class MemoryAudioOutput extends voice.AudioOutput {
  /** Finished segments, oldest first. */
  readonly segments: PlayedSegment[] = [];
  readonly #realtime: boolean;
  /** Captured, not finished: the first one is playing. */
  #queue: Playing[] = [];

  constructor({ sampleRate, realtime = true }: MemoryAudioOutputOptions = {}) {
    super(sampleRate);
    this.#realtime = realtime;
  }

  override async captureFrame(frame: AudioFrame): Promise<void> {
    await super.captureFrame(frame);
    let current = this.#queue.at(-1);
    if (!current || current.flushed) {
      const previous = current;
      const startsAt = Math.max(Date.now(), previous ? previous.startsAt + previous.capturedMs : 0);
      current = { frames: [], capturedMs: 0, startsAt, flushed: false, timer: null };
      this.#queue.push(current);
      this.onPlaybackStarted(startsAt);
    }
    current.frames.push(frame);
    current.capturedMs += (frame.samplesPerChannel / frame.sampleRate) * 1000;
  }

  override flush(): void {
    super.flush();
    const current = this.#queue.at(-1);
    if (!current || current.flushed) return;
    current.flushed = true;
    const endsIn = this.#realtime ? current.startsAt + current.capturedMs - Date.now() : 0;
    current.timer = setTimeout(() => this.#finish(current, current.capturedMs, false), Math.max(0, endsIn));
  }

  clearBuffer(): void {
    // A segment cut before its flush is over all the same: the next frame starts a new one.
    if (this.#queue.at(-1)?.flushed === false) super.flush();
    // The playing segment stops where it is; any queued behind it never started.
    for (const [i, segment] of [...this.#queue].entries()) {
      const playedMs = i === 0 && this.#realtime ? Math.min(Math.max(0, Date.now() - segment.startsAt), segment.capturedMs) : 0;
      this.#finish(segment, this.#realtime ? playedMs : segment.capturedMs, this.#realtime);
    }
  }

  /** Every segment played so far, joined (the mono samples a listener heard). */
  playedAudio(): Int16Array {
    const total = this.segments.reduce((n, s) => n + s.played.length, 0);
    const out = new Int16Array(total);
    let at = 0;
    for (const segment of this.segments) {
      out.set(segment.played, at);
      at += segment.played.length;
    }
    return out;
  }

  #finish(segment: Playing, playedMs: number, interrupted: boolean): void {
    if (segment.timer) clearTimeout(segment.timer);
    this.#queue = this.#queue.filter((s) => s !== segment);
    const sampleRate = segment.frames[0]?.sampleRate ?? this.sampleRate ?? 0;
    const captured = joinFrames(segment.frames);
    const played = captured.subarray(0, Math.min(captured.length, Math.round((playedMs * sampleRate) / 1000)));
    this.segments.push({ sampleRate, captured, played, interrupted, startedAt: segment.startsAt, endedAt: segment.startsAt + playedMs });
    this.onPlaybackFinished({ playbackPosition: playedMs / 1000, interrupted });
  }
}

function joinFrames(frames: AudioFrame[]): Int16Array {
  const out = new Int16Array(frames.reduce((n, f) => n + f.data.length, 0));
  let at = 0;
  for (const frame of frames) {
    out.set(frame.data, at);
    at += frame.data.length;
  }
  return out;
}
