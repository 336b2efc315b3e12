// The in-memory audio I/O against agents-js's AudioOutput/AudioInput contract: one
// playbackFinished per captured segment, interrupted at the played position on clearBuffer.
import { once } from 'node:events';
import { voice } from '@livekit/agents';
import { AudioFrame } from '@livekit/rtc-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { MemoryAudioInput, MemoryAudioOutput } from '../../src/voice/memory-audio.ts';
import { initAgentsLogger } from '../../src/voice/character-voice.ts';

const RATE = 24_000;

function tone(ms: number): AudioFrame {
  const samples = Int16Array.from({ length: (RATE * ms) / 1000 }, (_, i) => Math.round(8000 * Math.sin(i / 8)));
  return new AudioFrame(samples, RATE, 1, samples.length);
}

describe('memory audio', () => {
  beforeAll(() => initAgentsLogger('silent'));

  it('plays a flushed segment to its end', async () => {
    const output = new MemoryAudioOutput({ realtime: false });
    const started = once(output, voice.AudioOutput.EVENT_PLAYBACK_STARTED);
    for (let i = 0; i < 3; i++) await output.captureFrame(tone(20));
    output.flush();
    await started;
    expect(await output.waitForPlayout()).toEqual({ playbackPosition: 0.06, interrupted: false });
    expect(output.segments).toHaveLength(1);
    expect(output.segments[0]!.played).toEqual(output.segments[0]!.captured);
    expect(output.playedAudio().length).toBe((RATE * 60) / 1000);
  });

  it('stops a playing segment at clearBuffer and reports how far it got', async () => {
    const output = new MemoryAudioOutput();
    for (let i = 0; i < 50; i++) await output.captureFrame(tone(20));
    output.flush();
    const finished = once(output, voice.AudioOutput.EVENT_PLAYBACK_FINISHED);
    output.clearBuffer();
    const [event] = (await finished) as [voice.PlaybackFinishedEvent];
    expect(event.interrupted).toBe(true);
    expect(event.playbackPosition).toBeLessThan(0.5);
    const [segment] = output.segments;
    expect(segment!.captured.length).toBe(RATE);
    expect(segment!.played.length).toBeLessThan(segment!.captured.length);
    expect(await output.waitForPlayout()).toBe(event);
  });

  it('counts a segment cut before its flush once, and starts the next one fresh', async () => {
    const output = new MemoryAudioOutput({ realtime: false });
    await output.captureFrame(tone(20));
    output.clearBuffer();
    output.flush();
    await output.captureFrame(tone(40));
    output.flush();
    expect(await output.waitForPlayout()).toEqual({ playbackPosition: 0.04, interrupted: false });
    expect(output.segments.map((s) => s.captured.length)).toEqual([480, 960]);
  });

  it('cuts pushed PCM into frames on the input stream', async () => {
    const input = new MemoryAudioInput();
    const reader = input.stream.getReader();
    await input.pushPcm(new Int16Array(1000), 16_000, { frameMs: 20, realtime: false });
    const sizes: number[] = [];
    while (sizes.reduce((a, b) => a + b, 0) < 1000) {
      const { value } = await reader.read();
      sizes.push(value!.samplesPerChannel);
    }
    expect(sizes).toEqual([320, 320, 320, 40]);
    reader.releaseLock();
    await input.close();
  });
});
