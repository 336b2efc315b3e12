// A character's voice session on LiveKit Agents, fully offline: real synthesized speech in
// (flite through the local speech server), the offline VAD, real transcription (pocketsphinx),
// the character's reply out as real synthesized audio. No LiveKit server: the session's audio
// input and output live in memory. Skipped without the speech tools, except in CI.
import { once } from 'node:events';
import { llm, voice } from '@livekit/agents';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { TroupeError } from '../../src/errors.ts';
import { type CharacterResponder } from '../../src/voice/character-llm.ts';
import { MemoryAudioInput, MemoryAudioOutput } from '../../src/voice/memory-audio.ts';
import { SpeechClient, TTS_SAMPLE_RATE } from '../../src/voice/speech.ts';
import { spokenPrefix } from '../../src/voice/spoken-transcript.ts';
import { type AgentLine, type VoicePipeline, createVoicePipeline, initAgentsLogger } from '../../src/voice/voice-pipeline.ts';
import { missingSpeechTools, startSpeechServer, type SpeechServer } from '../support/speech-server.ts';

const missing = missingSpeechTools();
const skipServer = missing.length > 0 && !process.env.CI;
if (skipServer) console.warn(`voice pipeline tests skipped, missing: ${missing.join(', ')} (apt-get install flite pocketsphinx pocketsphinx-en-us)`);

const LONG_REPLY = 'The gate is open. Walk through quickly, because the guards change at dusk and the river road floods after the rain.';

function rms(samples: Int16Array): number {
  let sum = 0;
  for (const s of samples) sum += s * s;
  return Math.sqrt(sum / Math.max(1, samples.length));
}

/** The character's turn, scripted by the user's last line; records what it was given. */
function scriptedCharacter(lines: Record<string, string[]>, heard: string[]): CharacterResponder {
  return async function* (chatContext) {
    const last = chatContext.items.at(-1);
    const said = last instanceof llm.ChatMessage && last.role === 'user' ? (last.textContent ?? '') : '';
    heard.push(said);
    yield* lines[said] ?? ['I did not catch that.'];
  };
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

describe.skipIf(skipServer)('voice pipeline with the local speech server', () => {
  let server: SpeechServer;
  let speech: SpeechClient;
  let pipeline: VoicePipeline | null = null;
  let input: MemoryAudioInput | null = null;

  beforeAll(async () => {
    initAgentsLogger('silent');
    server = await startSpeechServer();
    server.expectPhrases(['Mira, open the gate', 'Close the door', 'Hello there']);
    speech = new SpeechClient({
      config: loadConfig({ INFERENCE_MAX_RETRIES: '0', STT_BASE_URL: server.baseUrl, TTS_BASE_URL: server.baseUrl, STT_MODEL: 'whisper-1', TTS_MODEL: 'gpt-4o-mini-tts' }).speech,
      logger: pino({ level: 'silent' }),
    });
  });
  afterEach(async () => {
    await pipeline?.close();
    await input?.close();
    pipeline = null;
    input = null;
  });
  afterAll(() => server?.close());

  async function say(text: string): Promise<Int16Array> {
    const chunks: Buffer[] = [];
    for await (const chunk of speech.synthesize(text, {}, new AbortController().signal)) chunks.push(chunk);
    const pcm = Buffer.concat(chunks);
    const samples = new Int16Array(pcm.length / 2);
    for (let i = 0; i < samples.length; i++) samples[i] = pcm.readInt16LE(i * 2);
    return samples;
  }

  async function startPipeline(respond: CharacterResponder): Promise<{ pipeline: VoicePipeline; input: MemoryAudioInput; output: MemoryAudioOutput; errors: Error[] }> {
    input = new MemoryAudioInput();
    const output = new MemoryAudioOutput();
    // Memory has no echo to cancel: the character can be interrupted from its first word.
    pipeline = createVoicePipeline({ speech, respond, input, output, voice: { voice: 'slt' }, aecWarmupMs: null });
    const errors: Error[] = [];
    pipeline.events.on('failure', (err) => errors.push(err));
    await pipeline.start();
    return { pipeline, input, output, errors };
  }

  it('hears a spoken line, runs the character turn and speaks the reply', async () => {
    const heard: string[] = [];
    const { pipeline, input, output, errors } = await startPipeline(scriptedCharacter({ 'Mira, open the gate': ['The gate ', 'is open.'] }, heard));
    const userLine = once(pipeline.events, 'user-line');
    const agentLine = once(pipeline.events, 'agent-line');

    const utterance = await say('Mira, open the gate');
    await input.pushSilence(300, TTS_SAMPLE_RATE);
    await input.pushPcm(utterance, TTS_SAMPLE_RATE);
    await input.pushSilence(1000, TTS_SAMPLE_RATE);

    expect(await userLine).toEqual([{ text: 'Mira, open the gate' }]);
    expect(await agentLine).toEqual([{ text: 'The gate is open.', interrupted: false }]);
    expect(heard).toEqual(['Mira, open the gate']);
    expect(server.transcriptions.at(-1)).toMatchObject({ sampleRate: TTS_SAMPLE_RATE, text: 'Mira, open the gate' });
    expect(server.speechRequests.at(-1)).toMatchObject({ input: 'The gate is open.', voice: 'slt', responseFormat: 'pcm' });

    // The reply as a listener heard it: real speech of a plausible length, played to the end.
    expect(output.segments).toHaveLength(1);
    const [segment] = output.segments;
    expect(segment).toMatchObject({ sampleRate: TTS_SAMPLE_RATE, interrupted: false });
    expect(segment!.played.length).toBe(segment!.captured.length);
    const seconds = segment!.played.length / TTS_SAMPLE_RATE;
    expect(seconds).toBeGreaterThan(0.6);
    expect(seconds).toBeLessThan(3);
    expect(rms(segment!.played)).toBeGreaterThan(500);
    expect(errors).toEqual([]);
  });

  it('stops speaking when the user talks over the character, and records only what was said', async () => {
    const heard: string[] = [];
    const { pipeline, input, output, errors } = await startPipeline(
      scriptedCharacter({ 'Mira, open the gate': [LONG_REPLY], 'Close the door': ['As you wish.'] }, heard),
    );
    const [first, second] = await Promise.all([say('Mira, open the gate'), say('Close the door')]);
    const lines: AgentLine[] = [];
    pipeline.events.on('agent-line', (line) => lines.push(line));
    const speaking = new Promise<void>((resolve) =>
      pipeline.session.on(voice.AgentSessionEventTypes.AgentStateChanged, (ev) => ev.newState === 'speaking' && resolve()),
    );

    await input.pushSilence(300, TTS_SAMPLE_RATE);
    await input.pushPcm(first, TTS_SAMPLE_RATE);
    // Silence until the reply plays, then the user cuts in.
    const pause = new AbortController();
    const silence = input.pushSilence(10_000, TTS_SAMPLE_RATE, { signal: pause.signal }).catch(() => {});
    await speaking;
    pause.abort();
    await silence;
    const cutIn = once(pipeline.events, 'agent-line');
    const nextUserLine = once(pipeline.events, 'user-line');
    await input.pushPcm(second, TTS_SAMPLE_RATE);
    await input.pushSilence(1000, TTS_SAMPLE_RATE);

    const [cut] = (await cutIn) as [AgentLine];
    expect(cut.interrupted).toBe(true);
    expect(cut.text.length).toBeGreaterThan(0);
    expect(cut.text.length).toBeLessThan(LONG_REPLY.length);
    expect(LONG_REPLY.startsWith(cut.text)).toBe(true);
    expect(await nextUserLine).toEqual([{ text: 'Close the door' }]);
    if (lines.length < 2) await once(pipeline.events, 'agent-line');
    expect(lines[1]).toEqual({ text: 'As you wish.', interrupted: false });
    expect(heard).toEqual(['Mira, open the gate', 'Close the door']);

    // The long reply stopped early: what played is a strict prefix of what was synthesized.
    const [long, short] = output.segments;
    expect(long!.interrupted).toBe(true);
    expect(long!.played.length).toBeGreaterThan(0);
    expect(long!.played.length).toBeLessThan(long!.captured.length);
    expect(rms(long!.played)).toBeGreaterThan(500);
    expect(short).toMatchObject({ interrupted: false });
    expect(errors).toEqual([]);
  });

  it('reports a failed transcription as a failure and keeps listening', async () => {
    const heard: string[] = [];
    const { pipeline, input } = await startPipeline(scriptedCharacter({ 'Hello there': ['Well met.'] }, heard));
    const utterance = await say('Hello there');
    server.expectPhrases([]); // the recognizer now answers 500
    try {
      const failure = once(pipeline.events, 'failure');
      await input.pushPcm(utterance, TTS_SAMPLE_RATE);
      await input.pushSilence(600, TTS_SAMPLE_RATE);
      const [err] = (await failure) as [Error];
      expect(err).toBeInstanceOf(TroupeError);
      expect(err).toMatchObject({ code: 'upstream_error' });
    } finally {
      server.expectPhrases(['Mira, open the gate', 'Close the door', 'Hello there']);
    }
    // The utterance was lost, not the session: the next one is heard and answered.
    const agentLine = once(pipeline.events, 'agent-line');
    await input.pushPcm(utterance, TTS_SAMPLE_RATE);
    await input.pushSilence(1000, TTS_SAMPLE_RATE);
    expect(await agentLine).toEqual([{ text: 'Well met.', interrupted: false }]);
    expect(heard).toEqual(['Hello there']);
  });
});
