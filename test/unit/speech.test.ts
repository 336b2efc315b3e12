// SpeechClient against a real local speech server (flite + pocketsphinx, see
// test/support/speech-server.ts). Without those binaries the server-backed tests are skipped on a
// developer's machine, but never in CI (CI is set): .ci/run installs them, so there a missing
// binary is a failure, not a silent skip.
import { once } from 'node:events';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { TroupeError } from '../../src/errors.ts';
import { SpeechClient, TTS_SAMPLE_RATE } from '../../src/voice/speech.ts';
import { decodeWav, encodeWav } from '../../src/voice/wav.ts';
import { missingSpeechTools, startSpeechServer, type SpeechServer } from '../support/speech-server.ts';

const logger = pino({ level: 'silent' });
const signal = new AbortController().signal;
const missing = missingSpeechTools();
const skipServer = missing.length > 0 && !process.env.CI;
if (skipServer) console.warn(`speech tests skipped, missing: ${missing.join(', ')} (apt-get install flite pocketsphinx pocketsphinx-en-us)`);

function client(env: Record<string, string>): SpeechClient {
  return new SpeechClient({ config: loadConfig({ INFERENCE_MAX_RETRIES: '0', ...env }).speech, logger });
}

async function collect(chunks: AsyncIterable<Buffer>): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for await (const chunk of chunks) out.push(chunk);
  return out;
}

function rms(pcm: Buffer): number {
  let sum = 0;
  for (let i = 0; i + 1 < pcm.length; i += 2) sum += pcm.readInt16LE(i) ** 2;
  return Math.sqrt(sum / (pcm.length / 2));
}

describe('wav', () => {
  it('round-trips PCM16 through a WAV file and mixes stereo down', () => {
    const samples = Int16Array.from([0, 1000, -1000, 32767, -32768]);
    const wav = encodeWav(samples, 16_000);
    expect(wav.length).toBe(44 + samples.length * 2);
    expect(decodeWav(wav)).toEqual({ sampleRate: 16_000, samples });
    expect(decodeWav(encodeWav(Int16Array.from([100, 300, -50, 50]), 8_000, 2)).samples).toEqual(Int16Array.from([200, 0]));
    expect(() => decodeWav(Buffer.from('not a wav file at all'))).toThrow(TroupeError);
  });
});

describe('SpeechClient settings', () => {
  it('names what voice lacks, and fails a call without it', async () => {
    expect(client({}).problems()).toEqual([
      expect.stringMatching(/^STT_BASE_URL is not set/),
      'STT_MODEL is not set: voice agents need a speech-to-text server model.',
      expect.stringMatching(/^TTS_BASE_URL is not set/),
      'TTS_MODEL is not set: voice agents need a text-to-speech server model.',
    ]);
    const partial = client({ INFERENCE_BASE_URL: 'http://127.0.0.1:1/v1', TTS_MODEL: 'tts-1' });
    expect(partial.problems()).toEqual(['STT_MODEL is not set: voice agents need a speech-to-text server model.']);
    await expect(partial.transcribe(new Int16Array(160), 16_000, signal)).rejects.toMatchObject({ code: 'upstream_unavailable', detailCode: 'stt_not_configured' });
  });

  it('maps an unreachable server to upstream_unavailable', async () => {
    const probe = createServer();
    probe.listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const { port } = probe.address() as AddressInfo;
    probe.close();
    await once(probe, 'close');
    const speech = client({ INFERENCE_BASE_URL: `http://127.0.0.1:${port}/v1`, STT_MODEL: 'm', TTS_MODEL: 'm' });
    const heard = speech.transcribe(new Int16Array(1600), 16_000, signal);
    await expect(heard).rejects.toBeInstanceOf(TroupeError);
    await expect(heard).rejects.toMatchObject({ code: 'upstream_unavailable', message: expect.stringContaining('STT_BASE_URL') });
    await expect(collect(speech.synthesize('Hello there', {}, signal))).rejects.toMatchObject({ code: 'upstream_unavailable', detailCode: 'upstream_unavailable' });
  });
});

describe.skipIf(skipServer)('SpeechClient with the local speech server', () => {
  let server: SpeechServer;
  let speech: SpeechClient;

  beforeAll(async () => {
    server = await startSpeechServer();
    speech = client({ STT_BASE_URL: server.baseUrl, TTS_BASE_URL: server.baseUrl, STT_MODEL: 'whisper-1', TTS_MODEL: 'gpt-4o-mini-tts' });
  });
  afterAll(() => server?.close());

  it('speaks a line as 24 kHz PCM and hears it back as the same text', async () => {
    const chunks = await collect(speech.synthesize('Mira, open the gate', { voice: 'slt' }, signal));
    const pcm = Buffer.concat(chunks);
    expect(chunks.every((c) => c.length % 2 === 0)).toBe(true);
    const seconds = pcm.length / 2 / TTS_SAMPLE_RATE;
    expect(seconds).toBeGreaterThan(0.8);
    expect(seconds).toBeLessThan(4);
    expect(rms(pcm)).toBeGreaterThan(500);

    server.expectPhrases(['Mira, open the gate', 'Close the door', 'Hello there']);
    expect(await speech.transcribe(pcm, TTS_SAMPLE_RATE, signal)).toBe('Mira, open the gate');
    expect(server.transcriptions.at(-1)).toMatchObject({ model: 'whisper-1', sampleRate: TTS_SAMPLE_RATE, text: 'Mira, open the gate' });
    // Int16Array input at another rate goes the same way.
    const samples = new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length / 2).filter((_, i) => i % 3 !== 2); // 24 kHz -> 16 kHz
    expect(await speech.transcribe(samples, 16_000, signal)).toBe('Mira, open the gate');
  });

  it("sends the character's voice and description, and TTS_VOICE for a character without one", async () => {
    await collect(speech.synthesize('Hello there', { voice: 'kal16', instructions: 'A gruff old gatekeeper.' }, signal));
    expect(server.speechRequests.at(-1)).toEqual({ model: 'gpt-4o-mini-tts', input: 'Hello there', voice: 'kal16', responseFormat: 'pcm', instructions: 'A gruff old gatekeeper.' });
    await collect(speech.synthesize('Hello there', { voice: null, instructions: null }, signal));
    expect(server.speechRequests.at(-1)).toMatchObject({ voice: 'alloy', instructions: undefined });
  });

  it('streams a long line in many chunks, and stopping early ends the request', async () => {
    const line = 'The northern gate stays shut until the captain returns from the river, and nobody passes without the seal of the old king.';
    const chunks = await collect(speech.synthesize(line, {}, signal));
    expect(chunks.length).toBeGreaterThan(1);
    expect(Buffer.concat(chunks).length / 2 / TTS_SAMPLE_RATE).toBeGreaterThan(4);

    // The server holds the rest back: the first audio arrives before the line is complete, and
    // leaving the loop must end the request (else the server would hold it open forever).
    server.stallNextSpeech(2);
    const closed = once(server.events, 'speech-closed');
    for await (const chunk of speech.synthesize(line, {}, signal)) {
      expect(chunk.length).toBeGreaterThan(0);
      break;
    }
    expect(await closed).toEqual([{ completed: false }]);
  });

  it('maps the server rejecting a request to invalid_request', async () => {
    server.expectPhrases(['Hello there']);
    // A server that cannot read the audio answers 400; ours reads 16-bit WAV only, so send 24-bit.
    const bad = encodeWav(new Int16Array(3200), 16_000);
    bad.writeUInt16LE(24, 34);
    const form = new FormData();
    form.set('model', 'whisper-1');
    form.set('file', new Blob([bad], { type: 'audio/wav' }), 'a.wav');
    const raw = await fetch(`${server.baseUrl}/audio/transcriptions`, { method: 'POST', body: form });
    expect(raw.status).toBe(400);
    expect(await raw.json()).toMatchObject({ error: { type: 'invalid_request_error', param: 'file' } });
    // Through the client: the SDK's errors become ours.
    const tts = client({ TTS_BASE_URL: server.baseUrl, TTS_MODEL: 'tts-1' });
    await expect(collect(tts.synthesize('x'.repeat(5000), {}, signal))).rejects.toMatchObject({ code: 'invalid_request', detailCode: 'upstream_rejected', message: expect.stringContaining('4096') });
  });

  it('rejects malformed requests with OpenAI error bodies', async () => {
    const post = (path: string, body: unknown) =>
      fetch(`${server.baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const cases: [unknown, string][] = [
      [{ input: 'hi', voice: 'alloy' }, 'model'],
      [{ model: 'm', voice: 'alloy' }, 'input'],
      [{ model: 'm', input: 'hi' }, 'voice'],
      [{ model: 'm', input: 'hi', voice: 'alloy', response_format: 'mp3' }, 'response_format'],
    ];
    for (const [body, param] of cases) {
      const res = await post('/audio/speech', body);
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ error: { type: 'invalid_request_error', param } });
    }
    const noFile = new FormData();
    noFile.set('model', 'whisper-1');
    const res = await fetch(`${server.baseUrl}/audio/transcriptions`, { method: 'POST', body: noFile });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { param: 'file' } });
    expect((await post('/audio/translations', {})).status).toBe(404);
  });

  it('answers response_format=text with the plain transcript', async () => {
    server.expectPhrases(['Close the door', 'Hello there']);
    const pcm = Buffer.concat(await collect(speech.synthesize('Close the door', {}, signal)));
    const form = new FormData();
    form.set('model', 'whisper-1');
    form.set('response_format', 'text');
    form.set('file', new Blob([encodeWav(pcm, TTS_SAMPLE_RATE)], { type: 'audio/wav' }), 'line.wav');
    const res = await fetch(`${server.baseUrl}/audio/transcriptions`, { method: 'POST', body: form });
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await res.text()).toBe('Close the door\n');
  });
});
