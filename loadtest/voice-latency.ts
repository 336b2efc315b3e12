/**
 * `npm run bench:voice`: Troupe's own share of a voice turn with real audio, timed on one clock in this process (the real server
 * on PGlite, its room WebSocket, one character's voice agent, the local flite and pocketsphinx speech server, a fake LLM streaming
 * word by word). Segments, budget (p95 <= 30 ms each, issue 11) and knobs: docs/benchmarks.md, Voice turn latency: settings. */
import { inference, voice } from '@livekit/agents';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { signAgentToken } from '../src/rooms/agent-token.ts';
import { createCharacterVoice, initAgentsLogger } from '../src/voice/character-voice.ts';
import { MemoryAudioInput, MemoryAudioOutput } from '../src/voice/memory-audio.ts';
import { RoomSocketLink } from '../src/voice/room-socket-link.ts';
import { RoomVoiceAgent } from '../src/voice/room-voice-agent.ts';
import { SpeechClient, TTS_SAMPLE_RATE, type SynthesisOptions } from '../src/voice/speech.ts';
import { startSpeechServer } from '../test/support/speech-server.ts';
import { startV1Fixture } from '../test/support/v1.ts';
import { gitState, machine, runBench } from './support/children.ts';
import { envNumber } from './support/env.ts';
import { markdownTable, percentile, roundSummary, sortedCopy, summarize, writeResults } from './support/report.ts';

const LIVEKIT = { apiKey: 'APIbench', apiSecret: 'bench-secret-0123456789abcdefghijklmnopqrstu' };
const LINE = 'Mira, open the gate';
const ANSWER = 'The harbour gate is open for you tonight.';
const BUDGET_MS = 30;
const now = () => performance.timeOrigin + performance.now();
if (process.argv.length > 2) throw new Error('bench:voice takes BENCH_* variables (docs/benchmarks.md), not arguments');
const turns = envNumber('BENCH_TURNS', 40, 1);
const chunkMs = envNumber('BENCH_LLM_CHUNK_MS', 20, 0);
/** JSON key and table row of each timed span; the last one is the whole turn, outside the budget. */
const SEGMENTS = [
  ['endOfSpeechToLlmRequest', 'a. end of speech -> LLM request'],
  ['sentenceToTtsRequest', 'b. first sentence complete -> TTS request'],
  ['ttsBytesToFirstFrame', 'c. first TTS bytes -> first audio frame'],
  ['endOfSpeechToFirstFrame', 'end of speech -> first audio frame (all of it, speech server and fake LLM included)'],
] as const;
/** The agent's speech client, timing its calls (the HTTP calls themselves are the speech server's share). */
class TimedSpeech extends SpeechClient {
  transcribed: { start: number; end: number }[] = [];
  synthesized: { start: number; firstBytes: number | null }[] = [];
  override transcribe(pcm: Int16Array | Buffer, sampleRate: number, signal: AbortSignal): Promise<string> {
    const start = now();
    return super.transcribe(pcm, sampleRate, signal).finally(() => this.transcribed.push({ start, end: now() }));
  }
  override async *synthesize(text: string, options: SynthesisOptions, signal: AbortSignal): AsyncGenerator<Buffer> {
    const mark = { start: now(), firstBytes: null as number | null };
    this.synthesized.push(mark);
    for await (const chunk of super.synthesize(text, options, signal)) {
      mark.firstBytes ??= now();
      yield chunk;
    }
  }
}
runBench('bench:voice', 20 * 60_000, async (run) => {
  initAgentsLogger('silent');
  const speechServer = await startSpeechServer();
  speechServer.expectPhrases([LINE]);
  const f = await startV1Fixture({ kind: 'pglite', vectors: true }, { LIVEKIT_URL: 'ws://127.0.0.1:9', LIVEKIT_API_KEY: LIVEKIT.apiKey,
    LIVEKIT_API_SECRET: LIVEKIT.apiSecret, ROOM_MAX_AGENT_TURNS: '0', LOG_LEVEL: 'warn' });
  const quiet = pino({ level: 'silent' });
  const speech = new TimedSpeech({ config: loadConfig({ INFERENCE_MAX_RETRIES: '0', STT_BASE_URL: speechServer.baseUrl,
    TTS_BASE_URL: speechServer.baseUrl, STT_MODEL: 'whisper-1', TTS_MODEL: 'tts-1' }).speech, logger: quiet });
  const vad = new inference.VAD();
  const mira = await f.api.post('/characters', { name: 'Mira Vance', description: 'A smuggler.' }).expect(201);
  const room = await f.api.post('/v1/rooms', { name: 'The Gate' }).expect(201);
  await f.api.post(`/v1/rooms/${String(room.id)}/participants`, { characterId: mira.id }).expect(201);
  const mouth = new MemoryAudioOutput();
  const firstFrames: number[] = [];
  mouth.on(voice.AudioOutput.EVENT_PLAYBACK_STARTED, () => firstFrames.push(now()));
  const characterVoice = createCharacterVoice({ speech, output: mouth, vad });
  await characterVoice.start();
  const microphones: MemoryAudioInput[] = [];
  let agent: RoomVoiceAgent | null = null;
  let linesDone: (() => void) | null = null;
  const [roomId, characterId] = [room.id as string, mira.id as string];
  const token = () => signAgentToken(LIVEKIT, { projectId: f.projectId, roomId, characterId }, 3600);
  const link = new RoomSocketLink({ baseUrl: f.t.url, roomId, token, logger: quiet, onEvent: (event) => {
    agent?.handle(event);
    if (event.type === 'transcript' && event.entry.speakerType === 'agent') linesDone?.();
  } });
  agent = new RoomVoiceAgent({ characterId, voice: characterVoice, link, speech, vad, logger: quiet });
  await link.connect();
  agent.addHuman('ada', 'Ada', () => {
    const input = new MemoryAudioInput();
    microphones.push(input);
    return input.stream;
  });
  agent.setListening(true);
  const chunks: Buffer[] = [];
  for await (const chunk of speech.synthesize(LINE, {}, new AbortController().signal)) chunks.push(chunk);
  speech.synthesized.length = 0;
  const pcm = Buffer.concat(chunks);
  const utterance = new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length / 2).slice();
  const samples: number[][] = SEGMENTS.map(() => []);
  const chats = () => f.upstream.requests.filter((r) => r.path === '/v1/chat/completions');
  for (let turn = 1; turn <= turns; turn++) {
    f.upstream.script({ text: ANSWER, chunkDelayMs: chunkMs });
    const chatsBefore = chats().length;
    const done = new Promise<void>((resolve) => (linesDone = resolve));
    // The listening path and the character's voice each read their own stream of the microphone.
    await Promise.all(microphones.map((mic) => mic.pushPcm(utterance, TTS_SAMPLE_RATE)));
    await Promise.all(microphones.map((mic) => mic.pushSilence(800, TTS_SAMPLE_RATE)));
    await done;
    const [stt, chat, tts, frame] = [speech.transcribed.at(-1)!, chats()[chatsBefore]!, speech.synthesized.at(-1)!, firstFrames.at(-1)!];
    const spans = [chat.receivedAt - stt.end, tts.start - (chat.lastChunkAt ?? NaN), frame - (tts.firstBytes ?? NaN), frame - stt.start];
    spans.forEach((ms, i) => samples[i]!.push(ms));
  }
  const table = markdownTable(['segment', 'p50', 'p95', 'max', 'budget'], SEGMENTS.map(([, name], i) => {
    const [s, p95] = [summarize(samples[i]!), percentile(sortedCopy(samples[i]!), 95)];
    const budget = i === SEGMENTS.length - 1 ? '' : p95 <= BUDGET_MS ? 'within' : '**over**';
    return [name, s.p50.toFixed(1), p95.toFixed(1), s.max.toFixed(1), budget];
  }), 'lrrrl');
  const markdown = `Troupe's share of a voice turn, ${turns} turns, ms (budget: p95 <= ${BUDGET_MS} ms each):\n\n${table}`;
  const result = {
    benchmark: 'voice-latency', at: new Date().toISOString(), troupe: await gitState(), machine: machine(),
    settings: { turns, llmChunkMs: chunkMs, line: LINE, answer: ANSWER, budgetMs: BUDGET_MS },
    segments: Object.fromEntries(SEGMENTS.map(([key], i) => [key, roundSummary(summarize(samples[i]!))])),
  };
  const paths = await writeResults('voice-latency', run.stamp, result, markdown);
  process.stdout.write(`${markdown}\n\nwrote ${paths.json}\n\n`);
  link.close();
  for (const closable of [agent, characterVoice, ...microphones]) await closable.close();
  await f.close();
  await speechServer.close();
});
