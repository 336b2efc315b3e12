import type { AgentDispatch, ParticipantInfo, Room } from 'livekit-server-sdk';

/** LiveKit's protobuf objects as the plain data the rest of Troupe uses. */
export interface LiveKitRoom {
  sid: string;
  name: string;
  metadata: string;
  numParticipants: number;
}

export interface LiveKitParticipant {
  sid: string;
  identity: string;
  name: string;
  /** LiveKit's participant kind in lower case: `standard` (a player), `agent`, `sip`, ... */
  kind: string;
}

export interface LiveKitDispatch {
  id: string;
  agentName: string;
  room: string;
  metadata: string;
}

export function toRoom(room: Room): LiveKitRoom {
  return { sid: room.sid, name: room.name, metadata: room.metadata, numParticipants: room.numParticipants };
}

export function toParticipant(participant: ParticipantInfo): LiveKitParticipant {
  // The kind enum is not exported by the SDK; its JSON form carries the name (absent = STANDARD).
  const json = participant.toJson() as { kind?: unknown };
  const kind = typeof json.kind === 'string' ? json.kind.toLowerCase() : 'standard';
  return { sid: participant.sid, identity: participant.identity, name: participant.name, kind };
}

export function toDispatch(dispatch: AgentDispatch): LiveKitDispatch {
  return { id: dispatch.id, agentName: dispatch.agentName, room: dispatch.room, metadata: dispatch.metadata };
}
