import { AccessToken, TrackSource, type VideoGrant } from 'livekit-server-sdk';
import { TroupeError } from '../errors.ts';
import type { LiveKitCredentials } from './credentials.ts';

/** What a game client needs to join a voice room. */
export interface JoinToken {
  token: string;
  /** The LiveKit URL (ws:// or wss://) to connect to with the token. */
  url: string;
}

export interface JoinTokenRequest {
  roomName: string;
  identity: string;
  /** Display name others see. */
  name?: string;
  ttlS: number;
}

/**
 * A player in a voice room may talk (microphone only), listen and send data, and nothing more:
 * no camera or screen share, no admin, create, list, record, hidden or agent rights. Fields left
 * out are false in LiveKit (canUpdateOwnMetadata, hidden, recorder, agent...).
 */
function joinGrant(roomName: string): VideoGrant {
  return {
    room: roomName,
    roomJoin: true,
    canPublish: true,
    canPublishSources: [TrackSource.MICROPHONE],
    canSubscribe: true,
    canPublishData: true,
  };
}

/** Signs a join token locally (no call to LiveKit). */
export async function signJoinToken(credentials: LiveKitCredentials, request: JoinTokenRequest): Promise<JoinToken> {
  // The SDK throws plain errors for these; they are our callers' bugs, so say which one.
  if (!request.roomName || !request.identity) {
    throw new TroupeError('internal_error', 'A voice-room join token needs a room name and an identity.');
  }
  const token = new AccessToken(credentials.apiKey, credentials.apiSecret, {
    identity: request.identity,
    ttl: request.ttlS,
    ...(request.name ? { name: request.name } : {}),
  });
  token.addGrant(joinGrant(request.roomName));
  return { token: await token.toJwt(), url: credentials.url };
}
