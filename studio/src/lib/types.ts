/** The API's resources as the studio reads them (see the README's API reference). */
export interface Character {
  id: string;
  name: string;
  description: string | null;
  voiceId: string | null;
  voiceDescription: string | null;
  capabilityGroupIds: string[];
}

export type CapabilityType = 'client_function_fire' | 'client_function_call' | 'server_function_fire' | 'server_function_call';
export type ParameterType = 'string' | 'number' | 'boolean' | 'integer';

export interface Parameter {
  name: string;
  type: ParameterType;
  description: string | null;
  required: boolean;
}

export interface Capability {
  id: string;
  name: string;
  description: string | null;
  type: CapabilityType;
  parameters: Parameter[];
  webhookUrl: string | null;
}

export interface TroupeDocument {
  id: string;
  name: string;
  mimeType: string;
  fileSize: number;
  status: 'pending' | 'processing' | 'ready' | 'failed';
  chunkCount: number;
  errorMessage: string | null;
}

export interface Message {
  id: string;
  role: 'player' | 'character';
  content: string;
}

export interface Citation {
  documentId: string;
  chunkId: string;
  score: number;
  excerpt: string;
}

export interface Participant {
  id: string;
  characterId: string;
  leftAt: string | null;
}

export interface Room {
  id: string;
  name: string;
  mode: 'freeform' | 'scripted';
  scenePrompt: string | null;
  endedAt: string | null;
  participants: Participant[];
}

export interface TranscriptEntry {
  id: string;
  speakerType: 'user' | 'agent';
  characterId: string | null;
  speakerName?: string | null;
  content: string;
}

export interface Project {
  id: string;
  name: string;
}

export interface ApiKey {
  id: string;
  name: string | null;
  prefix: string;
  createdAt: string;
  revokedAt: string | null;
}
