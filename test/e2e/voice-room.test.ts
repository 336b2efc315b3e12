// A two-character voice room, offline and with real audio: a player's line is synthesized (flite
// through the local speech server), heard by the room's one listening path (the offline VAD,
// pocketsphinx), said to the real Troupe server over the room WebSocket by a voice agent, and
// answered by the character the director picks, whose agent speaks it (real synthesized audio)
// and tells the room what was heard. No LiveKit server: the agents' audio lives in memory.
import { once } from 'node:events';
import { inference, voice } from '@livekit/agents';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { signAgentToken } from '../../src/rooms/agent-token.ts';
import { createCharacterVoice, initAgentsLogger, type CharacterVoice } from '../../src/voice/character-voice.ts';
import { MemoryAudioInput, MemoryAudioOutput } from '../../src/voice/memory-audio.ts';
import { RoomSocketLink } from '../../src/voice/room-socket-link.ts';
import { RoomVoiceAgent, type CapabilityEvent } from '../../src/voice/room-voice-agent.ts';
import { SpeechClient, TTS_SAMPLE_RATE } from '../../src/voice/speech.ts';
import { BACKENDS } from '../support/env.ts';
import { missingSpeechTools, startSpeechServer, type SpeechServer } from '../support/speech-server.ts';
import { startV1Fixture, type V1Fixture } from '../support/v1.ts';
import { openSocket, type TestSocket } from '../support/ws-client.ts';

const missing = missingSpeechTools();
const skip = missing.length > 0 && !process.env.CI;
if (skip) console.warn(`voice room tests skipped, missing: ${missing.join(', ')} (apt-get install flite pocketsphinx pocketsphinx-en-us)`);

const LIVEKIT = { apiKey: 'APIvoicetest', apiSecret: 'voice-test-secret-0123456789abcdefghijklmnop' };
const PHRASES = ['Mira, open the gate', 'Close the door', 'Nell, ring the bell'];
const LONG_LINE = 'The gate is open. Walk through quickly, because the guards change at dusk and the river road floods after the rain.';

type Entry = { speakerType: string; speakerName: string | null; characterId: string | null; content: string };

function rms(samples: Int16Array): number {
  let sum = 0;
  for (const s of samples) sum += s * s;
  return Math.sqrt(sum / Math.max(1, samples.length));
}

interface Seat {
  voice: CharacterVoice;
  agent: RoomVoiceAgent;
  link: RoomSocketLink;
  mouth: MemoryAudioOutput;
  /** Its capability calls, as the LiveKit data messages would carry them. */
  calls: CapabilityEvent[];
}

describe.skipIf(skip).each(BACKENDS)('a voice room with two characters on $kind', (backend) => {
  let f: V1Fixture;
  let server: SpeechServer;
  let speech: SpeechClient;
  let mira: { id: string };
  let rook: { id: string };
  let bell: { id: string };
  let seats: Seat[] = [];
  /** Each player's microphone: one stream per consumer (as LiveKit gives each its own AudioStream). */
  let players = new Map<string, MemoryAudioInput[]>();
  let sockets: TestSocket[] = [];
  const vad = new inference.VAD();

  beforeAll(async () => {
    initAgentsLogger('silent');
    server = await startSpeechServer();
    server.expectPhrases(PHRASES);
    f = await startV1Fixture(backend, {
      LIVEKIT_URL: 'ws://127.0.0.1:9',
      LIVEKIT_API_KEY: LIVEKIT.apiKey,
      LIVEKIT_API_SECRET: LIVEKIT.apiSecret,
      ROOM_MAX_AGENT_TURNS: '1',
    });
    speech = new SpeechClient({
      config: loadConfig({ INFERENCE_MAX_RETRIES: '0', STT_BASE_URL: server.baseUrl, TTS_BASE_URL: server.baseUrl, STT_MODEL: 'whisper-1', TTS_MODEL: 'tts-1' }).speech,
      logger: pino({ level: 'silent' }),
    });
    mira = await f.api.post('/characters', { name: 'Mira Vance', description: 'A smuggler.', voiceId: 'slt' }).expect(201);
    rook = await f.api.post('/characters', { name: 'Captain Rook', description: 'A harbour master.', voiceId: 'rms' }).expect(201);
    const ring = await f.api.post('/capabilities', { name: 'ring_bell', type: 'client_function_fire', parameters: [] }).expect(201);
    bell = await f.api.post('/characters', { name: 'Nell', description: 'Rings the harbour bell.', capabilityGroupIds: [ring.id] }).expect(201);
  });
  afterEach(async () => {
    for (const seat of seats) {
      seat.link.close();
      await seat.agent.close();
      await seat.voice.close();
    }
    for (const inputs of players.values()) for (const input of inputs) await input.close();
    for (const s of sockets) await s.close();
    seats = [];
    sockets = [];
    players = new Map();
    f.upstream.clearScripts();
  });
  afterAll(async () => {
    await f?.close();
    await server?.close();
  });

  async function synthesize(text: string): Promise<Int16Array> {
    const chunks: Buffer[] = [];
    for await (const chunk of speech.synthesize(text, {}, new AbortController().signal)) chunks.push(chunk);
    const pcm = Buffer.concat(chunks);
    return new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length / 2).slice();
  }

  /** A room with these characters, one voice agent each; the first one's holds the listening path for the players. */
  async function voiceRoom(cast = [mira, rook], names = ['Ada']): Promise<{ roomId: string; watch: TestSocket }> {
    const room = await f.api.post('/v1/rooms', { name: 'The Gate' }).expect(201);
    const roomId = room.id as string;
    for (const c of cast) await f.api.post(`/v1/rooms/${roomId}/participants`, { characterId: c.id }).expect(201);
    const watch = await openSocket(`${f.t.url.replace('http', 'ws')}/v1/rooms/${roomId}/ws?token=${f.key}`);
    sockets.push(watch);
    await watch.next('ready');
    const microphone = (name: string) => () => {
      const input = new MemoryAudioInput();
      players.set(name, [...(players.get(name) ?? []), input]);
      return input.stream;
    };
    for (const character of cast) {
      const mouth = new MemoryAudioOutput();
      const spoken = createCharacterVoice({ speech, output: mouth, vad, voice: { voice: character === rook ? 'rms' : 'slt' } });
      await spoken.start();
      let agent: RoomVoiceAgent | null = null;
      const link = new RoomSocketLink({
        baseUrl: f.t.url,
        roomId,
        token: () => signAgentToken(LIVEKIT, { projectId: f.projectId, roomId, characterId: character.id }, 600),
        onEvent: (event) => agent?.handle(event),
        logger: pino({ level: 'silent' }),
      });
      const calls: CapabilityEvent[] = [];
      agent = new RoomVoiceAgent({ characterId: character.id, voice: spoken, link, speech, vad, logger: pino({ level: 'silent' }), onCapability: (event) => calls.push(event) });
      await link.connect();
      for (const name of names) agent.addHuman(name.toLowerCase(), name, microphone(name));
      seats.push({ voice: spoken, agent, link, mouth, calls });
    }
    seats[0]!.agent.setListening(true);
    return { roomId, watch };
  }

  /** A player speaks: the listening path and every character's voice hear them; the others are silent meanwhile. */
  async function playerSays(name: string, pcm: Int16Array): Promise<void> {
    const others = [...players].filter(([n]) => n !== name).flatMap(([, inputs]) => inputs);
    const ms = (pcm.length / TTS_SAMPLE_RATE) * 1000;
    await Promise.all([...(players.get(name) ?? []).map((input) => input.pushPcm(pcm, TTS_SAMPLE_RATE)), ...others.map((input) => input.pushSilence(ms, TTS_SAMPLE_RATE))]);
    await allSilent(800);
  }
  const adaSays = (pcm: Int16Array) => playerSays('Ada', pcm);
  const allSilent = (ms: number) => Promise.all([...players.values()].flat().map((input) => input.pushSilence(ms, TTS_SAMPLE_RATE)));
  const adaIsSilent = allSilent;

  const transcript = async (roomId: string) => (await f.api.get(`/v1/rooms/${roomId}/transcript`).expect(200)) as Entry[];
  const lines = (entries: Entry[]) => entries.map((e) => `${e.speakerName ?? 'Player'}: ${e.content}`);
  /** Waits for the next `count` transcript entries on the room's socket. */
  const entries = async (watch: TestSocket, count: number) => {
    const seen: Entry[] = [];
    while (seen.length < count) seen.push((await watch.next('transcript')).entry as Entry);
    return seen;
  };

  it("answers a spoken line with the addressed character's voice, then the other's, without overlap", async () => {
    const { roomId, watch } = await voiceRoom();
    f.upstream.script({ text: 'Ask Captain Rook.' }, { text: 'The gate stays shut tonight.' });
    const line = await synthesize('Mira, open the gate');
    await adaSays(line);

    const said = await entries(watch, 3);
    expect(lines(said)).toEqual(['Ada: Mira, open the gate', 'Mira Vance: Ask Captain Rook.', 'Captain Rook: The gate stays shut tonight.']);
    expect(said[1]).toMatchObject({ speakerType: 'agent', characterId: mira.id });
    expect(lines(await transcript(roomId))).toEqual(lines(said));
    // One transcription for the one human, whatever the number of characters.
    expect(server.transcriptions.filter((t) => t.text === 'Mira, open the gate')).toHaveLength(1);

    // Each character spoke its own line, audibly, in its own voice, one after the other.
    const [miraSeat, rookSeat] = seats;
    expect(miraSeat!.mouth.segments).toHaveLength(1);
    expect(rookSeat!.mouth.segments).toHaveLength(1);
    const miraAudio = miraSeat!.mouth.segments[0]!;
    const rookAudio = rookSeat!.mouth.segments[0]!;
    expect(miraAudio.interrupted).toBe(false);
    expect(rms(miraAudio.played)).toBeGreaterThan(500);
    expect(rms(rookAudio.played)).toBeGreaterThan(500);
    expect(rookAudio.startedAt).toBeGreaterThanOrEqual(miraAudio.endedAt);
    expect(server.speechRequests.map((r) => [r.input, r.voice])).toEqual(
      expect.arrayContaining([
        ['Ask Captain Rook.', 'slt'],
        ['The gate stays shut tonight.', 'rms'],
      ]),
    );
  });

  it('stops a character a player talks over, stores only what was heard, and hears the player next', async () => {
    const { roomId, watch } = await voiceRoom();
    // Mira's long line; after Ada's next line (which names nobody) the director gives Mira the
    // floor, and after her answer gives it back.
    f.upstream.script({ text: LONG_LINE }, { text: JSON.stringify({ speaker: mira.id }) }, { text: 'As you wish.' }, { text: '{"speaker": null}' });
    const [first, second] = await Promise.all([synthesize('Mira, open the gate'), synthesize('Close the door')]);
    // Mira starts speaking; Ada cuts in about a second into her audio.
    const playing = once(seats[0]!.mouth, voice.AudioOutput.EVENT_PLAYBACK_STARTED);
    await adaSays(first);
    await watch.next('transcript'); // Ada's line
    expect(await watch.next('speaker')).toMatchObject({ characterId: mira.id });
    await playing;
    await adaIsSilent(1000);
    await adaSays(second);

    const [cut, next, answer] = await entries(watch, 3);
    expect(cut).toMatchObject({ speakerType: 'agent', characterId: mira.id });
    expect(cut!.content.length).toBeGreaterThan(0);
    expect(cut!.content.length).toBeLessThan(LONG_LINE.length);
    expect(LONG_LINE.startsWith(cut!.content)).toBe(true);
    expect(next).toMatchObject({ speakerType: 'user', speakerName: 'Ada', content: 'Close the door' });
    expect(answer).toMatchObject({ speakerType: 'agent', content: 'As you wish.' });
    expect((await transcript(roomId)).map((e) => e.content)).toEqual(['Mira, open the gate', cut!.content, 'Close the door', 'As you wish.']);
    const long = seats[0]!.mouth.segments[0]!;
    expect(long.interrupted).toBe(true);
    expect(long.played.length).toBeLessThan(long.captured.length);
  });

  it("hears each player on their own path with their name, and a voice turn's capability call reaches the room's clients", async () => {
    const { roomId, watch } = await voiceRoom([bell, rook], ['Ada', 'Ben']);
    f.upstream.script({ text: 'Dong!', toolCalls: [{ name: 'ring_bell', arguments: '{}' }] }, { text: ' There.' });
    await playerSays('Ben', await synthesize('Nell, ring the bell'));
    expect((await watch.next('transcript')).entry).toMatchObject({ speakerType: 'user', speakerName: 'Ben', content: 'Nell, ring the bell' });
    expect(await watch.next('capability')).toMatchObject({ characterId: bell.id, name: 'ring_bell', params: {} });
    const said = (await watch.next('transcript')).entry as Entry;
    expect(said).toMatchObject({ speakerType: 'agent', characterId: bell.id });
    expect(said.content).toContain('Dong!');
    expect(seats[0]!.calls).toEqual([expect.objectContaining({ type: 'capability', characterId: bell.id, name: 'ring_bell' })]);
    expect(seats[1]!.calls).toEqual([]);
    expect(rms(seats[0]!.mouth.playedAudio())).toBeGreaterThan(500);
    expect(seats[1]!.mouth.segments).toEqual([]);
    expect((await transcript(roomId)).map((e) => e.speakerName)).toEqual(['Ben', 'Nell']);
  });
});
