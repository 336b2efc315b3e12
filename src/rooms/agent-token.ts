import { AccessToken, TokenVerifier } from 'livekit-server-sdk';
import { RTC_IDENTITY_PREFIX } from './service.ts';

/** Marks a token as a voice agent's pass to a room WebSocket (a player's join token has none). */
const PURPOSE = 'troupe-room-agent';

/** Which character's voice, in which project's room. */
export interface AgentGrant {
  projectId: string;
  roomId: string;
  characterId: string;
}

interface Keys {
  apiKey: string;
  apiSecret: string;
}

/**
 * A voice agent's credential for the room WebSocket: a LiveKit access token signed with the
 * LiveKit API secret, which the agent worker and the server share (the worker needs it to
 * register with LiveKit anyway), for identity `agent-<characterId>` in that one room.
 */
export async function signAgentToken(keys: Keys, grant: AgentGrant, ttlS: number): Promise<string> {
  const token = new AccessToken(keys.apiKey, keys.apiSecret, {
    identity: `${RTC_IDENTITY_PREFIX}${grant.characterId}`,
    ttl: ttlS,
    metadata: JSON.stringify({ purpose: PURPOSE, ...grant }),
  });
  token.addGrant({ room: grant.roomId, roomJoin: false, agent: true });
  return token.toJwt();
}

/** The grant of a valid agent token; null for anything else (an API key, a player's join token, a forgery). */
export async function verifyAgentToken(keys: Keys, token: string): Promise<AgentGrant | null> {
  if (token.split('.').length !== 3) return null;
  try {
    const claims = await new TokenVerifier(keys.apiKey, keys.apiSecret).verify(token);
    const meta: unknown = JSON.parse(claims.metadata ?? 'null');
    if (typeof meta !== 'object' || meta === null) return null;
    const { purpose, projectId, roomId, characterId } = meta as Record<string, unknown>;
    if (purpose !== PURPOSE || typeof projectId !== 'string' || typeof roomId !== 'string' || typeof characterId !== 'string') return null;
    if (claims.sub !== `${RTC_IDENTITY_PREFIX}${characterId}` || claims.video?.room !== roomId) return null;
    return { projectId, roomId, characterId };
  } catch {
    return null;
  }
}
