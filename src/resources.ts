import type { Logger } from 'pino';
import type { Invalidations } from './cache/invalidations.ts';
import type { CapabilityService } from './capabilities/service.ts';
import type { CharacterService } from './characters/service.ts';
import type { Config } from './config.ts';
import type { ConversationGateway } from './conversations/gateway.ts';
import type { RoomGateway } from './rooms/gateway.ts';
import type { ConversationService } from './conversations/service.ts';
import type { Database } from './db/database.ts';
import type { DocumentProcessor } from './documents/processor.ts';
import type { DocumentService } from './documents/service.ts';
import type { ChatCompletionService } from './inference/chat.ts';
import type { ResponsesService } from './inference/responses/service.ts';
import type { Metrics } from './observability/metrics.ts';
import type { PerformService } from './perform/service.ts';
import type { ProjectService } from './projects/service.ts';
import type { RoomService } from './rooms/service.ts';
import type { RoomVoiceControl } from './rooms/voice-control.ts';

/** Everything a request handler may use, passed as one object: no module-level singletons. */
export interface Resources {
  config: Config;
  logger: Logger;
  database: Database;
  invalidations: Invalidations;
  metrics: Metrics;
  projects: ProjectService;
  characters: CharacterService;
  capabilities: CapabilityService;
  chat: ChatCompletionService;
  /** /v1/responses: the Responses API over `chat`, with stored responses. */
  responses: ResponsesService;
  conversations: ConversationService;
  /** Conversation actors, wherever they run: every message to a conversation goes through them. */
  conversationActors: ConversationGateway;
  perform: PerformService;
  /** Voice rooms: membership and transcript (live voice plugs in through its hooks). */
  rooms: RoomService;
  /** Room actors, wherever they run: every line said in a room goes through them. */
  roomActors: RoomGateway;
  /** Rooms' LiveKit side: join tokens, start (agent dispatch), LiveKit's webhooks. */
  roomVoice: RoomVoiceControl;
  documents: DocumentService;
  /** This process's consumer of the document queue (uploads wake it). */
  documentProcessor: DocumentProcessor;
  /** Flips to true when shutdown starts, so /readyz tells load balancers to stop sending. */
  lifecycle: { draining: boolean };
}
