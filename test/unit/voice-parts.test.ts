// The voice agent's parts on LiveKit Agents, fully offline: real synthesized speech (flite through
// the local speech server), the offline VAD, real transcription (pocketsphinx). No LiveKit
// server: audio lives in memory. Skipped without the speech tools, except in CI. The whole room
// (two characters, interruptions) is test/e2e/voice-room.test.ts.
import { inference } from '@livekit/agents';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { TroupeError } from '../../src/errors.ts';
import { createCharacterVoice, initAgentsLogger } from '../../src/voice/character-voice.ts';
import { HumanListener } from '../../src/voice/human-listener.ts';
import { MemoryAudioInput, MemoryAudioOutput } from '../../src/voice/memory-audio.ts';
import { SpeechClient, TTS_SAMPLE_RATE } from '../../src/voice/speech.ts';
import { spokenPrefix } from '../../src/voice/spoken-transcript.ts';
import { TextQueue } from '../../src/voice/text-queue.ts';
import { missingSpeechTools, startSpeechServer, type SpeechServer } from '../support/speech-server.ts';

const missing = missingSpeechTools();
const skipServer = missing.length > 0 && !process.env.CI;
if (skipServer) console.warn(`voice tests skipped, missing: ${missing.join(', ')} (apt-get install flite pocketsphinx pocketsphinx-en-us)`);

function rms(samples: Int16Array): number {
  let sum = 0;
  for (const s of samples) sum += s * s;
  return Math.sqrt(sum / Math.max(1, samples.length));
}

describe('spokenPrefix', () => {
  it('maps a played position onto whole words, anchored at sentence starts', () => {
    const text = 'The gate is open. Walk through quickly.';
    const marks = [
      { text: 'The gate is open.', atS: 0 },
      { text: 'Walk through quickly.', atS: 2 },
    ];
    expect(spokenPrefix(text, marks, 0, 4)).toBe('');
    expect(spokenPrefix(text, marks, 1, 4)).toBe('The gate');
    expect(spokenPrefix(text, marks, 2, 4)).toBe('The gate is open.');
    expect(spokenPrefix(text, marks, 3.5, 4)).toBe('The gate is open. Walk through');
    expect(spokenPrefix(text, marks, 4, 4)).toBe(text);
    // Without marks (or marks not found in the text) the whole line is one span.
    expect(spokenPrefix(text, [{ text: 'elsewhere', atS: 1 }], 1, 4)).toBe('The gate');
  });
});

describe.skipIf(skipServer)('voice parts with the local speech server', () => {
  let server: SpeechServer;
  let speech: SpeechClient;
  const vad = new inference.VAD();

  beforeAll(async () => {
    initAgentsLogger('silent');
    server = await startSpeechServer();
    server.expectPhrases(['Mira, open the gate', 'Close the door', 'Hello there']);
    speech = new SpeechClient({
      config: loadConfig({ INFERENCE_MAX_RETRIES: '0', STT_BASE_URL: server.baseUrl, TTS_BASE_URL: server.baseUrl, STT_MODEL: 'whisper-1', TTS_MODEL: 'gpt-4o-mini-tts' }).speech,
      logger: pino({ level: 'silent' }),
    });
  });
  afterAll(() => server?.close());

  async function say(text: string): Promise<Int16Array> {
    const chunks: Buffer[] = [];
    for await (const chunk of speech.synthesize(text, {}, new AbortController().signal)) chunks.push(chunk);
    const pcm = Buffer.concat(chunks);
    return new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length / 2).slice();
  }

  it('speaks a streamed line in the character\'s voice and reports it as heard in full', async () => {
    const output = new MemoryAudioOutput();
    const voice = createCharacterVoice({ speech, output, vad, voice: { voice: 'slt', instructions: 'Dry and quick.' } });
    await voice.start();
    try {
      const line = new TextQueue();
      const spoken = voice.speak(line);
      line.push('The gate ');
      line.push('is open.');
      line.end();
      expect(await spoken).toEqual({ text: 'The gate is open.', interrupted: false });
      expect(server.speechRequests.at(-1)).toMatchObject({ input: 'The gate is open.', voice: 'slt', responseFormat: 'pcm', instructions: 'Dry and quick.' });
      // Real speech of a plausible length, played to the end.
      const [segment] = output.segments;
      expect(segment).toMatchObject({ sampleRate: TTS_SAMPLE_RATE, interrupted: false });
      expect(segment!.played.length).toBe(segment!.captured.length);
      const seconds = segment!.played.length / TTS_SAMPLE_RATE;
      expect(seconds).toBeGreaterThan(0.6);
      expect(seconds).toBeLessThan(3);
      expect(rms(segment!.played)).toBeGreaterThan(500);
    } finally {
      await voice.close();
    }
  });

  it('hears each utterance of a human once, in order, and reports one it could not transcribe', async () => {
    const microphone = new MemoryAudioInput();
    const lines: string[] = [];
    const failures: Error[] = [];
    let heard: () => void = () => {};
    const listener = new HumanListener(microphone.stream, {
      speech,
      vad,
      onLine: (text) => {
        lines.push(text);
        heard();
      },
      onFailure: (err) => {
        failures.push(err);
        heard();
      },
    });
    const next = () => new Promise<void>((resolve) => (heard = resolve));
    try {
      const [hello, close] = await Promise.all([say('Hello there'), say('Close the door')]);
      let done = next();
      await microphone.pushPcm(hello, TTS_SAMPLE_RATE);
      await microphone.pushSilence(800, TTS_SAMPLE_RATE);
      await done;
      server.expectPhrases([]); // the recognizer now answers 500
      done = next();
      await microphone.pushPcm(close, TTS_SAMPLE_RATE);
      await microphone.pushSilence(800, TTS_SAMPLE_RATE);
      await done;
      server.expectPhrases(['Mira, open the gate', 'Close the door', 'Hello there']);
      done = next();
      await microphone.pushPcm(close, TTS_SAMPLE_RATE);
      await microphone.pushSilence(800, TTS_SAMPLE_RATE);
      await done;
      expect(lines).toEqual(['Hello there', 'Close the door']);
      expect(failures).toHaveLength(1);
      expect(failures[0]).toBeInstanceOf(TroupeError);
      expect(failures[0]).toMatchObject({ code: 'upstream_error' });
    } finally {
      server.expectPhrases(['Mira, open the gate', 'Close the door', 'Hello there']);
      await listener.close();
      await microphone.close();
    }
  });
});
