import type { Logger } from 'pino';
import type { ConversationActors } from '../actors/conversation-actors.ts';
import type { Invalidations } from './cache/invalidations.ts';
import type { CapabilityService } from './capabilities/service.ts';
import type { CharacterService } from './characters/service.ts';
import type { Config } from './config.ts';
import type { ConversationService } from './conversations/service.ts';
import type { Database } from './db/database.ts';
import type { DocumentProcessor } from './documents/processor.ts';
import type { DocumentService } from './documents/service.ts';
import type { ChatCompletionService } from './inference/chat.ts';
import type { ResponsesService } from './inference/responses/service.ts';
import type { Metrics } from './observability/metrics.ts';
import type { PerformService } from './perform/service.ts';
import type { ProjectService } from './projects/service.ts';

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
  conversationActors: ConversationActors;
  perform: PerformService;
  documents: DocumentService;
  /** This process's consumer of the document queue (uploads wake it). */
  documentProcessor: DocumentProcessor;
  /** Flips to true when shutdown starts, so /readyz tells load balancers to stop sending. */
  lifecycle: { draining: boolean };
}
