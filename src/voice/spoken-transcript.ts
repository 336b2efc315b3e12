import { type TimedString, USERDATA_TIMED_TRANSCRIPT, voice } from '@livekit/agents';
import type { AudioFrame } from '@livekit/rtc-node';

/**
 * What a character actually said when cut off. agents-js records an interrupted reply as the
 * `synchronizedTranscript` of the audio output's playbackFinished event; without one it records
 * the whole generated text, as if the player had heard it all. Its own synchronizer lives inside
 * RoomIO (not exported), so a session with other outputs puts this between the session and the
 * real output: the reply's text comes in through `text`, its audio through `audio`, and the played
 * position that the output reports is mapped back onto the text.
 *
 * The mapping is exact at sentence starts (the TTS adapter marks each sentence's first frame) and
 * proportional to characters within a sentence; a word cut in half is not counted as said. If the
 * TTS had not finished the line when it was cut, the unsynthesized tail is not known yet, so the
 * last sentence is taken to end where its captured audio does.
 */
/** agents-js does not export the TextOutput class, only the session slot typed with it. */
export type TextOutput = NonNullable<voice.AgentSession['output']['transcription']>;

export class SpokenTranscript {
  readonly audio: voice.AudioOutput;
  readonly text: TextOutput;
  #said = '';
  /** Sentences the TTS started, at their offset into the segment's audio. */
  #marks: { text: string; atS: number }[] = [];
  #capturedS = 0;
  /** What was heard of the last segment that finished. */
  lastHeard = '';

  constructor(sink: voice.AudioOutput) {
    this.audio = new TranscribedAudioOutput(this, sink);
    this.text = new CollectingTextOutput(this);
  }

  /** @internal */
  _addText(text: string): void {
    this.#said += text;
  }

  /** @internal */
  _addFrame(frame: AudioFrame): void {
    const timed = frame.userdata[USERDATA_TIMED_TRANSCRIPT] as TimedString[] | undefined;
    for (const mark of timed ?? []) this.#marks.push({ text: mark.text, atS: this.#capturedS });
    this.#capturedS += frame.samplesPerChannel / frame.sampleRate;
  }

  /** @internal The segment is over: what of it was heard. */
  _endSegment(event: voice.PlaybackFinishedEvent): string {
    const spoken = event.interrupted ? spokenPrefix(this.#said, this.#marks, event.playbackPosition, this.#capturedS) : this.#said;
    this.lastHeard = spoken;
    this.#said = '';
    this.#marks = [];
    this.#capturedS = 0;
    return spoken;
  }
}

/** Whole words of `text` heard by `positionS` seconds into `totalS` seconds of audio. */
export function spokenPrefix(text: string, marks: readonly { text: string; atS: number }[], positionS: number, totalS: number): string {
  if (positionS >= totalS) return text;
  // Anchors (character offset, time) from the start, each located sentence, and the end.
  const anchors: { at: number; s: number }[] = [{ at: 0, s: 0 }];
  let cursor = 0;
  for (const mark of marks) {
    const at = text.indexOf(mark.text.trim(), cursor);
    const last = anchors.at(-1)!;
    if (at < 0 || at < last.at || mark.atS < last.s) continue;
    anchors.push({ at, s: mark.atS });
    cursor = at;
  }
  anchors.push({ at: text.length, s: totalS });
  let cut = 0;
  for (let i = 0; i + 1 < anchors.length; i++) {
    const from = anchors[i]!;
    const to = anchors[i + 1]!;
    if (positionS < to.s) {
      cut = from.at + Math.floor(((positionS - from.s) / (to.s - from.s)) * (to.at - from.at));
      break;
    }
  }
  let heard = text.slice(0, cut);
  if (cut < text.length && /\S/.test(text[cut]!)) heard = heard.replace(/\S+$/, '');
  return heard.trimEnd();
}

class TranscribedAudioOutput extends voice.AudioOutput {
  readonly #transcript: SpokenTranscript;
  readonly #sink: voice.AudioOutput;

  constructor(transcript: SpokenTranscript, sink: voice.AudioOutput) {
    super(sink.sampleRate, sink, { pause: false });
    this.#transcript = transcript;
    this.#sink = sink;
  }

  override async captureFrame(frame: AudioFrame): Promise<void> {
    await super.captureFrame(frame);
    this.#transcript._addFrame(frame);
    await this.#sink.captureFrame(frame);
  }

  override flush(): void {
    super.flush();
    this.#sink.flush();
  }

  clearBuffer(): void {
    this.#sink.clearBuffer();
  }

  // Called for the sink's playbackFinished (the base class listens to the next in chain).
  override onPlaybackFinished(event: voice.PlaybackFinishedEvent): void {
    super.onPlaybackFinished({ ...event, synchronizedTranscript: this.#transcript._endSegment(event) });
  }
}

/** Structurally a TextOutput (agents-js never checks instanceof); the end of the chain. */
class CollectingTextOutput {
  readonly #transcript: SpokenTranscript;

  constructor(transcript: SpokenTranscript) {
    this.#transcript = transcript;
  }

  async captureText(text: string | TimedString): Promise<void> {
    this.#transcript._addText(typeof text === 'string' ? text : text.text);
  }

  flush(): void {}
  onAttached(): void {}
  onDetached(): void {}
}
