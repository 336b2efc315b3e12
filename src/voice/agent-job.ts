import { type JobContext, defineAgent, inference } from '@livekit/agents';
import { AudioStream, type RemoteParticipant, type RemoteTrack, RoomEvent, TrackKind } from '@livekit/rtc-node';
import { loadConfig } from '../config.ts';
import { createLogger } from '../observability/logger.ts';
import { signAgentToken } from '../rooms/agent-token.ts';
import type { DispatchMetadata } from '../rooms/voice-control.ts';
import { RTC_IDENTITY_PREFIX } from '../rooms/service.ts';
import { createCharacterVoice } from './character-voice.ts';
import { RoomSocketLink } from './room-socket-link.ts';
import { RoomVoiceAgent } from './room-voice-agent.ts';
import { SpeechClient, TTS_SAMPLE_RATE } from './speech.ts';

/** Capability calls reach the humans' devices as LiveKit data messages on this topic (as well as room events). */
export const CAPABILITY_TOPIC = 'troupe.capability';
/** Agent tokens for the room WebSocket are made per connection and live this long. */
const AGENT_TOKEN_TTL_S = 3_600;

/**
 * One dispatched job: one character's voice in one LiveKit room (the worker accepted it as
 * `agent-<characterId>`, see worker.ts). It runs in its own process, made by agents-js.
 */
export default defineAgent({
  entry: async (ctx: JobContext) => {
    const config = loadConfig(process.env);
    const logger = createLogger(config.logLevel).child({ job: ctx.job.id });
    const { apiKey, apiSecret } = config.livekit;
    if (!apiKey || !apiSecret) throw new Error('LIVEKIT_API_KEY and LIVEKIT_API_SECRET are needed to speak in a room');
    const meta = JSON.parse(ctx.job.metadata) as DispatchMetadata;
    const speech = new SpeechClient({ config: config.speech, logger });
    const vad = new inference.VAD();
    await ctx.connect();

    const voice = createCharacterVoice({
      speech,
      output: { room: ctx.room },
      vad,
      voice: { voice: meta.voiceId ?? null, instructions: meta.voiceDescription ?? null },
    });
    await voice.start();
    let agent: RoomVoiceAgent | null = null;
    const link = new RoomSocketLink({
      baseUrl: config.livekit.troupeUrl,
      roomId: meta.roomId,
      token: () => signAgentToken({ apiKey, apiSecret }, { projectId: meta.projectId, roomId: meta.roomId, characterId: meta.characterId }, AGENT_TOKEN_TTL_S),
      onEvent: (event) => {
        agent?.handle(event);
        if (event.type === 'ended') ctx.shutdown('room ended');
      },
      logger,
    });
    const encoder = new TextEncoder();
    agent = new RoomVoiceAgent({
      characterId: meta.characterId,
      voice,
      link,
      speech,
      vad,
      logger,
      onCapability: (event) => {
        const data = encoder.encode(JSON.stringify(event));
        ctx.room.localParticipant?.publishData(data, { reliable: true, topic: CAPABILITY_TOPIC }).catch((err: unknown) => logger.warn({ err }, 'capability call not sent as a data message'));
      },
    });
    await link.connect();

    const room = ctx.room;
    const isAgent = (identity: string) => identity.startsWith(RTC_IDENTITY_PREFIX);
    // One listening path per room: the character agent whose identity sorts first listens to
    // every human; the others only speak. Every agent sees the same participants, so they agree.
    const electListener = () => {
      const own = room.localParticipant?.identity ?? '';
      const agents = [own, ...[...room.remoteParticipants.values()].map((p) => p.identity).filter(isAgent)].sort();
      agent?.setListening(agents[0] === own);
    };
    const onTrack = (track: RemoteTrack, _publication: unknown, participant: RemoteParticipant) => {
      if (track.kind !== TrackKind.KIND_AUDIO || isAgent(participant.identity)) return;
      agent?.addHuman(participant.identity, participant.name || null, () => new AudioStream(track, { sampleRate: TTS_SAMPLE_RATE, numChannels: 1 }));
    };
    room.on(RoomEvent.TrackSubscribed, onTrack);
    room.on(RoomEvent.TrackUnsubscribed, (_track: RemoteTrack, _publication: unknown, participant: RemoteParticipant) => agent?.removeHuman(participant.identity));
    room.on(RoomEvent.ParticipantConnected, electListener);
    room.on(RoomEvent.ParticipantDisconnected, (participant: RemoteParticipant) => {
      agent?.removeHuman(participant.identity);
      electListener();
    });
    for (const participant of room.remoteParticipants.values()) {
      for (const publication of participant.trackPublications.values()) {
        if (publication.track) onTrack(publication.track as RemoteTrack, publication, participant);
      }
    }
    electListener();

    ctx.addShutdownCallback(async () => {
      link.close();
      await agent?.close();
      await voice.close();
    });
    logger.info({ roomId: meta.roomId, characterId: meta.characterId }, 'voice agent joined');
  },
});
